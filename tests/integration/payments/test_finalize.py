"""The payment's finalising statement on the real database: status, credit event,
outbox jobs and NOTIFY together or not at all, once."""

from __future__ import annotations

import uuid
from decimal import Decimal

import asyncpg
import pytest

from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.payments.finalize import FAILED, SUCCEEDED, credit_event_id, finalize
from payflow.payments.records import load_payment
from payflow_lab.bench.submit import DirectSubmitter


async def _payment(pool: asyncpg.Pool, settings: Settings, merchant: uuid.UUID, url: str | None):
    payment_id = await DirectSubmitter(pool, settings).submit_payment(
        merchant, "12.34", "USD", uuid.uuid4().hex, url
    )
    async with pool.acquire() as conn:
        return await load_payment(conn, payment_id)


async def _finalize(pool: asyncpg.Pool, settings: Settings, payment, status: str) -> bool:
    async with pool.acquire() as conn, transaction(conn, settings):
        return await finalize(conn, payment, status, "trace-1")


async def _jobs(pool: asyncpg.Pool, payment_id: uuid.UUID) -> list[tuple[str, dict]]:
    rows = await pool.fetch(
        "SELECT topic, payload FROM outbox WHERE topic <> 'payment.created'"
        " AND (payload->>'payment_id' = $1 OR payload->>'event_id' = $2) ORDER BY id",
        str(payment_id),
        credit_event_id(payment_id),
    )
    return sorted((r["topic"], r["payload"]) for r in rows)


async def test_success_writes_status_credit_and_jobs_once_first_and_later_payments(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "m", admin=False)
    accounts = []
    for _ in range(2):  # the first opens the settlement account, the second finds it
        payment = await _payment(pool, settings, merchant, "https://example.com/hook")
        assert await _finalize(pool, settings, payment, SUCCEEDED)
        assert not await _finalize(pool, settings, payment, SUCCEEDED)  # a duplicate
        assert not await _finalize(pool, settings, payment, FAILED)
        stored = await pool.fetchrow(
            "SELECT status, processed_at FROM payments WHERE id = $1", payment["id"]
        )
        assert stored["status"] == SUCCEEDED and stored["processed_at"] is not None
        event = await pool.fetchrow(
            "SELECT account_id, amount, event_type, status, trace_id FROM payment_events"
            " WHERE event_id = $1",
            credit_event_id(payment["id"]),
        )
        assert event is not None
        assert (event["amount"], event["event_type"], event["status"], event["trace_id"]) == (
            Decimal("12.34"),
            "payment_credit",
            "pending",
            payment["trace_id"],  # the payment's own trace, not the caller's "trace-1"
        )
        accounts.append(event["account_id"])
        assert await _jobs(pool, payment["id"]) == [
            ("ledger.event", {"version": 1, "event_id": credit_event_id(payment["id"])}),
            ("webhook.deliver", {"version": 1, "payment_id": str(payment["id"])}),
        ]
    assert accounts[0] == accounts[1]
    owner = await pool.fetchrow(
        "SELECT merchant_id, asset, settlement FROM accounts WHERE id = $1", accounts[0]
    )
    assert tuple(owner) == (merchant, "USD", True)


async def test_decline_and_missing_url_write_only_what_applies(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "m", admin=False)
    declined = await _payment(pool, settings, merchant, "https://example.com/hook")
    assert await _finalize(pool, settings, declined, FAILED)
    assert await _jobs(pool, declined["id"]) == [
        ("webhook.deliver", {"version": 1, "payment_id": str(declined["id"])})
    ]
    assert await pool.fetchval("SELECT count(*) FROM payment_events") == 0
    silent = await _payment(pool, settings, merchant, None)
    assert await _finalize(pool, settings, silent, SUCCEEDED)
    assert await _jobs(pool, silent["id"]) == [
        ("ledger.event", {"version": 1, "event_id": credit_event_id(silent["id"])})
    ]


@pytest.mark.parametrize("first", [True, False])
async def test_rolled_back_finalize_leaves_nothing(
    pool: asyncpg.Pool, settings: Settings, first: bool
) -> None:
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "m", admin=False)
    if not first:  # the account exists: the one-statement path
        assert await _finalize(
            pool, settings, await _payment(pool, settings, merchant, None), SUCCEEDED
        )
    events_before = await pool.fetchval("SELECT count(*) FROM payment_events")
    payment = await _payment(pool, settings, merchant, "https://example.com/hook")
    with pytest.raises(RuntimeError):
        async with pool.acquire() as conn, transaction(conn, settings):
            assert await finalize(conn, payment, SUCCEEDED, None)
            raise RuntimeError("crash before commit")
    assert await pool.fetchval("SELECT status FROM payments WHERE id = $1", payment["id"]) == (
        "pending"
    )
    assert await pool.fetchval("SELECT count(*) FROM payment_events") == events_before
    assert await _jobs(pool, payment["id"]) == []


async def test_finalize_refuses_to_run_outside_a_transaction(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "m", admin=False)
    payment = await _payment(pool, settings, merchant, None)
    async with pool.acquire() as conn:
        with pytest.raises(RuntimeError):
            await finalize(conn, payment, SUCCEEDED, None)
