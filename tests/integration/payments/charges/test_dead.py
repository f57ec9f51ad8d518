"""Dead-lettering a payment never fails it without knowing what the gateway did."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import Callable
from decimal import Decimal

import asyncpg
import pytest
import structlog
from redis.asyncio import Redis

import payflow.payments.processor as processor_module
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.errors import Conflict, RetryableError
from payflow.payments.charges import mark_needs_review
from payflow.payments.finalize import SUCCEEDED
from payflow.payments.gateway import ChargeRequest, EmulatedGateway
from payflow.payments.processor import PaymentProcessor
from payflow.payments.review import list_needs_review, resolve_charge
from tests.integration.payments.charges.support import (
    UNREACHABLE_REDIS,
    announced_jobs,
    attempt_states,
    claim_as_dying_worker,
    payment_status,
    pending_payment,
)
from tests.integration.payments.charges.workers import payment_created
from tests.processes import run_payflow


async def test_dead_claimed_unanswered_charge_stays_pending_for_review_then_recovers(
    pool: asyncpg.Pool,
    charge_settings: Settings,
    emulator: Callable[..., EmulatedGateway],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """on_dead with a claimed, unanswered attempt and the gateway unreachable: the
    payment stays pending, the attempt is `needs_review` (with an alert), the DLQ row
    is recorded, nothing is announced. The operator's replay later settles it."""
    _, payment_id = await pending_payment(pool, charge_settings, "https://example.com/h")
    await claim_as_dying_worker(pool, charge_settings, payment_id, lease_s=30.0)
    client = Redis.from_url(UNREACHABLE_REDIS, socket_connect_timeout=1)
    try:
        down = EmulatedGateway(client, "x:", 0.0, 0.0, 0.0)
        processor = PaymentProcessor(pool, charge_settings, down, database=charge_settings)
        with structlog.testing.capture_logs() as logs:
            monkeypatch.setattr(processor_module, "log", structlog.get_logger("payflow.payments"))
            await processor.on_dead(
                payment_created(payment_id, attempt=4), RetryableError("gateway unreachable")
            )
    finally:
        await client.aclose()

    payment = await pool.fetchrow(
        "SELECT status, processed_at FROM payments WHERE id = $1", payment_id
    )
    assert (payment["status"], payment["processed_at"]) == ("pending", None)
    assert await attempt_states(pool, payment_id) == [(1, "needs_review")]
    reason = await pool.fetchval(
        "SELECT reason FROM charge_attempts WHERE payment_id = $1", payment_id
    )
    assert "gateway unreachable" in reason
    dead = await pool.fetch("SELECT source, subject_id, attempt FROM dead_letter_queue")
    assert [tuple(row) for row in dead] == [("payment", str(payment_id), 4)]
    assert await announced_jobs(pool, payment_id) == []
    alerts = [entry for entry in logs if entry["event"] == "payflow.payments.needs_review"]
    assert len(alerts) == 1 and alerts[0]["log_level"] == "error"

    # The operator replays (or a sweep re-announces) once the gateway is back: the new
    # attempt asks payment_status(), the gateway never saw the charge, so it charges now.
    await PaymentProcessor(pool, charge_settings, emulator(), database=charge_settings).handle(
        payment_created(payment_id)
    )
    assert await payment_status(pool, payment_id) == SUCCEEDED
    assert await emulator().charge_count(payment_id) == 1
    assert await attempt_states(pool, payment_id) == [(1, "superseded"), (2, "approved")]


@pytest.mark.parametrize(("failure_rate", "final"), [(0.0, "succeeded"), (1.0, "failed")])
async def test_dead_claimed_charge_with_a_known_answer_is_finalized_by_it(
    pool: asyncpg.Pool,
    charge_settings: Settings,
    emulator: Callable[..., EmulatedGateway],
    failure_rate: float,
    final: str,
) -> None:
    _, payment_id = await pending_payment(pool, charge_settings)
    await claim_as_dying_worker(pool, charge_settings, payment_id, lease_s=30.0)
    gateway = emulator(failure_rate)
    await gateway.charge(ChargeRequest(payment_id, Decimal("5.00"), "USD"))
    await PaymentProcessor(pool, charge_settings, gateway, database=charge_settings).on_dead(
        payment_created(payment_id, attempt=4), RetryableError("answer lost")
    )
    assert await payment_status(pool, payment_id) == final
    expected = "approved" if final == SUCCEEDED else "declined"
    assert await attempt_states(pool, payment_id) == [(1, expected)]
    credits = await pool.fetchval("SELECT count(*) FROM payment_events")
    assert credits == (1 if final == SUCCEEDED else 0)
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 1


async def test_dead_payment_never_claimed_is_failed(
    pool: asyncpg.Pool, charge_settings: Settings, emulator: Callable[..., EmulatedGateway]
) -> None:
    _, payment_id = await pending_payment(pool, charge_settings)
    await PaymentProcessor(pool, charge_settings, emulator(), database=charge_settings).on_dead(
        payment_created(payment_id, attempt=4), RetryableError("database was down")
    )
    assert await payment_status(pool, payment_id) == "failed"
    assert await attempt_states(pool, payment_id) == []
    assert await emulator().charge_count(payment_id) == 0


async def _parked(pool: asyncpg.Pool, settings: Settings) -> uuid.UUID:
    _, payment_id = await pending_payment(pool, settings, "https://example.com/h")
    await claim_as_dying_worker(pool, settings, payment_id, lease_s=30.0)
    async with pool.acquire() as conn, transaction(conn, settings):
        assert await mark_needs_review(conn, payment_id, "gateway unreachable") == 1
    return payment_id


async def test_operator_lists_and_resolves_a_parked_charge(
    pool: asyncpg.Pool, charge_settings: Settings
) -> None:
    approved, declined = await _parked(pool, charge_settings), await _parked(pool, charge_settings)
    listed = await list_needs_review(pool)
    assert [item.payment_id for item in listed] == [approved, declined]
    assert (listed[0].amount, listed[0].currency, listed[0].reason) == (
        Decimal("5.00"),
        "USD",
        "gateway unreachable",
    )

    done = await resolve_charge(
        pool, charge_settings, approved, approved=True, reference="ch_1", operator="alice"
    )
    assert done == "resolved: payment succeeded (attempt 1, by alice)"
    await resolve_charge(
        pool, charge_settings, declined, approved=False, reference="", operator="alice"
    )

    assert await payment_status(pool, approved) == SUCCEEDED
    assert await announced_jobs(pool, approved) == ["ledger.event", "webhook.deliver"]
    assert await payment_status(pool, declined) == "failed"
    assert await announced_jobs(pool, declined) == ["webhook.deliver"]
    row = await pool.fetchrow(
        "SELECT state, reason, gateway_reference FROM charge_attempts WHERE payment_id = $1",
        approved,
    )
    assert tuple(row) == ("approved", "resolved by alice", "ch_1")
    assert await list_needs_review(pool) == []
    with pytest.raises(Conflict, match="already succeeded"):
        await resolve_charge(
            pool, charge_settings, approved, approved=False, reference="", operator="bob"
        )


async def test_resolving_a_payment_resolves_its_dead_letters(
    pool: asyncpg.Pool, charge_settings: Settings
) -> None:
    """`payments resolve` closes a parked payment's dead letters, so `payflow status`
    does not fail on them until each is replayed to no effect."""
    payment_id = await _parked(pool, charge_settings)
    other = await _parked(pool, charge_settings)
    for subject in (payment_id, payment_id, other):
        await pool.execute(
            "INSERT INTO dead_letter_queue (source, subject_id, error, attempt)"
            " VALUES ('payment', $1, 'gateway unreachable', 4)",
            str(subject),
        )
    done = await resolve_charge(
        pool, charge_settings, payment_id, approved=True, reference="ch_9", operator="dora"
    )
    assert done == (
        "resolved: payment succeeded (attempt 1, by dora); 2 dead letter(s) resolved with it"
    )
    rows = await pool.fetch(
        "SELECT subject_id, resolved_by, resolution FROM dead_letter_queue ORDER BY id"
    )
    assert [(r["subject_id"], r["resolved_by"]) for r in rows] == [
        (str(payment_id), "dora"),
        (str(payment_id), "dora"),
        (str(other), None),  # another payment's letter is left to its own resolution
    ]
    assert rows[0]["resolution"] == "the payment was resolved by its operator: succeeded"


async def test_resolve_refuses_a_live_claim_and_a_payment_never_claimed(
    pool: asyncpg.Pool, charge_settings: Settings
) -> None:
    _, live = await pending_payment(pool, charge_settings)
    await claim_as_dying_worker(pool, charge_settings, live, lease_s=30.0)
    with pytest.raises(Conflict, match="live claim"):
        await resolve_charge(pool, charge_settings, live, approved=True, reference="", operator="a")
    _, unclaimed = await pending_payment(pool, charge_settings)
    with pytest.raises(Conflict, match="no unanswered charge attempt"):
        await resolve_charge(
            pool, charge_settings, unclaimed, approved=True, reference="", operator="a"
        )
    assert await payment_status(pool, live) == "pending"
    assert await payment_status(pool, unclaimed) == "pending"


def _cli(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url, "COLUMNS": "250"}
    return run_payflow(args, env, timeout=60)


async def test_payments_review_and_resolve_commands(
    pool: asyncpg.Pool, charge_settings: Settings, database_url: str
) -> None:
    payment_id = await _parked(pool, charge_settings)
    review = await asyncio.to_thread(_cli, database_url, "payments", "review")
    assert review.returncode == 0, review.stderr
    assert str(payment_id) in review.stdout
    done = await asyncio.to_thread(
        _cli, database_url, "payments", "resolve", str(payment_id), "--declined", "--by", "carol"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "resolved: payment failed (attempt 1, by carol)"
    again = await asyncio.to_thread(
        _cli, database_url, "payments", "resolve", str(payment_id), "--approved"
    )
    assert again.returncode == 1
    assert "Conflict" in again.stderr and "already failed" in again.stderr
    assert await payment_status(pool, payment_id) == "failed"
