"""Claim before charging: concurrent deliveries, a worker that dies after the gateway
charged, and the emulator's determinism."""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import subprocess
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import asyncpg
import pytest
from redis.asyncio import Redis

from payflow.config import Settings
from payflow.errors import RetryableError
from payflow.payments.charges import ChargeInProgress
from payflow.payments.finalize import SUCCEEDED, credit_event_id
from payflow.payments.gateway import ChargeRequest, EmulatedGateway
from payflow.payments.processor import PaymentProcessor
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.payments.charges.support import (
    UNREACHABLE_REDIS,
    announced_jobs,
    attempt_states,
    claim_as_dying_worker,
    payment_status,
    pending_payment,
)
from tests.integration.payments.charges.workers import handle_after_barrier, payment_created
from tests.integration.support import wait_until
from tests.processes import spawn_role


def _handle_in_processes(
    database_url: str, key_prefix: str, payment_id: uuid.UUID, processes: int
) -> list[str]:
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(processes)
        with context.Pool(processes) as workers:
            return workers.starmap(
                handle_after_barrier,
                [(database_url, key_prefix, str(payment_id), 0.5, barrier)] * processes,
            )


async def test_concurrent_deliveries_in_separate_processes_charge_once(
    pool: asyncpg.Pool,
    charge_settings: Settings,
    database_url: str,
    key_prefix: str,
    emulator: Callable[..., EmulatedGateway],
) -> None:
    """Four OS processes handle the same `payment.created` at once (gateway latency
    0.5 s): one claims and charges, the others see its live claim and retry later (or,
    arriving after the commit, see a final payment). One charge, one credit."""
    _, payment_id = await pending_payment(pool, charge_settings, "https://example.com/h")

    outcomes = await asyncio.to_thread(
        _handle_in_processes, database_url, key_prefix, payment_id, 4
    )

    assert outcomes.count("finalized") == 1, outcomes
    assert set(outcomes) - {"finalized"} <= {"duplicate", "in_progress"}, outcomes
    assert await emulator().charge_count(payment_id) == 1
    assert await payment_status(pool, payment_id) == SUCCEEDED
    assert await attempt_states(pool, payment_id) == [(1, "approved")]
    assert await pool.fetchval("SELECT count(*) FROM payment_events") == 1
    assert await pool.fetchval(
        "SELECT amount FROM payment_events WHERE event_id = $1", credit_event_id(payment_id)
    ) == Decimal("5.00")
    assert await announced_jobs(pool, payment_id) == ["ledger.event", "webhook.deliver"]
    # The retry of a delivery that met the live claim finds the payment final.
    await PaymentProcessor(pool, charge_settings, emulator(), database=charge_settings).handle(
        payment_created(payment_id)
    )
    assert await emulator().charge_count(payment_id) == 1
    assert await announced_jobs(pool, payment_id) == ["ledger.event", "webhook.deliver"]


async def test_a_live_claim_makes_a_redelivery_retry_without_calling_the_gateway(
    pool: asyncpg.Pool, charge_settings: Settings, emulator: Callable[..., EmulatedGateway]
) -> None:
    _, payment_id = await pending_payment(pool, charge_settings)
    await claim_as_dying_worker(pool, charge_settings, payment_id, lease_s=30.0)
    processor = PaymentProcessor(pool, charge_settings, emulator(), database=charge_settings)
    with pytest.raises(ChargeInProgress):
        await processor.handle(payment_created(payment_id))
    assert await emulator().charge_count(payment_id) == 0
    assert await attempt_states(pool, payment_id) == [(1, "claimed")]
    assert await payment_status(pool, payment_id) == "pending"


async def test_approved_charge_whose_worker_died_is_recovered_by_status_not_recharged(
    pool: asyncpg.Pool, charge_settings: Settings, emulator: Callable[..., EmulatedGateway]
) -> None:
    """The gateway approves, the worker dies before its commit. The redelivery runs
    against an emulator that would decline any fresh charge: it must ask `payment_status()`,
    learn the approval, and end `succeeded` with the one charge, never `failed`."""
    _, payment_id = await pending_payment(pool, charge_settings)
    await claim_as_dying_worker(pool, charge_settings, payment_id, lease_s=0.2)
    first = await emulator().charge(ChargeRequest(payment_id, Decimal("5.00"), "USD"))
    assert first.approved
    # ... the worker dies here: no answer recorded, the lease runs out.
    await asyncio.sleep(0.3)
    declining = emulator(failure_rate=1.0)
    assert not declining.decide(payment_id).approved  # a fresh charge would be declined

    await PaymentProcessor(pool, charge_settings, declining, database=charge_settings).handle(
        payment_created(payment_id)
    )

    assert await payment_status(pool, payment_id) == SUCCEEDED
    assert await declining.charge_count(payment_id) == 1
    assert await attempt_states(pool, payment_id) == [(1, "superseded"), (2, "approved")]
    reference = await pool.fetchval(
        "SELECT gateway_reference FROM charge_attempts WHERE state = 'approved'"
    )
    assert reference == first.reference != ""
    assert await announced_jobs(pool, payment_id) == ["ledger.event"]


def _spawn_worker(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    return spawn_role(
        settings,
        log_path,
        "worker",
        "--queues",
        "payments",
        GATEWAY_DELAY_MIN_S="30",
        GATEWAY_DELAY_MAX_S="30",
        GATEWAY_FAILURE_RATE="0",
        CHARGE_LEASE_S="1",
    )


async def test_worker_killed_after_the_gateway_charged_ends_succeeded_with_one_charge(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
    redis: Redis,
    tmp_path: Path,
) -> None:
    """A real worker process is SIGKILLed while the gateway holds its (approved) charge.
    The broker redelivers to a worker whose gateway would decline a fresh charge; it
    waits out the dead worker's lease, takes the attempt over, asks `payment_status()`."""
    settings = pipe_settings.model_copy(update={"retry_tiers_ms": (500, 1000, 2000)})
    relay = await start_roles(("relay",))
    payment_id = await submitter.submit_payment(merchant[0], "4.00", "USD", "k-kill", sink.url)
    gateway = EmulatedGateway(redis, settings.redis_key_prefix, 0.0, 0.0, 1.0)
    proc = _spawn_worker(settings, tmp_path / "worker.log")
    try:

        async def charged() -> bool:
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()
            return await gateway.charge_count(payment_id) == 1

        await wait_until(charged, what="the dying worker's gateway charge")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    worker = await start_roles(("worker",), settings=settings, gateway=gateway)
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="the redelivered payment finalized and notified",
    )
    await worker.stop()
    await relay.stop()
    assert await payment_status(pool, payment_id) == SUCCEEDED
    assert await gateway.charge_count(payment_id) == 1
    assert await attempt_states(pool, payment_id) == [(1, "superseded"), (2, "approved")]
    assert await pool.fetchval("SELECT count(*) FROM payment_events") == 1
    assert len(sink.received) == 1
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0


async def test_emulator_is_deterministic_per_payment_id_and_idempotent(
    redis: Redis, key_prefix: str
) -> None:
    ids = [uuid.uuid4() for _ in range(200)]

    def build(prefix: str, failure_rate: float, seed: int | None) -> EmulatedGateway:
        return EmulatedGateway(redis, key_prefix + prefix, 0.0, 0.0, failure_rate, seed)

    def request(payment_id: uuid.UUID) -> ChargeRequest:
        return ChargeRequest(payment_id, Decimal("1.00"), "USD")

    one, other = build("a:", 0.5, 7), build("b:", 0.5, 7)
    answers = [await one.charge(request(i)) for i in ids]
    reversed_answers = [await other.charge(request(i)) for i in reversed(ids)]
    assert answers == reversed_answers[::-1]  # same seed, any order, any instance
    declines = sum(not answer.approved for answer in answers)
    assert 60 < declines < 140  # about half, from the hash
    reseeded = [build("c:", 0.5, 8).decide(i).approved for i in ids]
    assert reseeded != [answer.approved for answer in answers]
    assert [build("d:", 0.5, 7).decide(i) for i in ids] == answers

    # A repeat charge returns the first answer, whatever the repeat would decide itself.
    flip = build("a:", 0.0 if not answers[0].approved else 1.0, 7)
    assert await flip.charge(request(ids[0])) == answers[0]
    assert await flip.charge_count(ids[0]) == 2
    assert await flip.status(ids[0]) == answers[0]
    never = uuid.uuid4()
    assert await flip.status(never) is None
    assert await flip.charge_count(never) == 0


async def test_unreachable_emulator_is_a_retryable_gateway_failure() -> None:
    client = Redis.from_url(UNREACHABLE_REDIS, socket_connect_timeout=1)
    try:
        down = EmulatedGateway(client, "x:", 0.0, 0.0, 0.0)
        with pytest.raises(RetryableError):
            await down.charge(ChargeRequest(uuid.uuid4(), Decimal("1.00"), "USD"))
        with pytest.raises(RetryableError):
            await down.status(uuid.uuid4())
    finally:
        await client.aclose()
