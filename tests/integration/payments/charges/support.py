"""Helpers of the charge-claim tests (imported by the test modules)."""

from __future__ import annotations

import uuid

import asyncpg

from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.payments.charges import Claim, claim_charge
from payflow.payments.finalize import credit_event_id
from payflow_lab.bench.submit import DirectSubmitter

UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"  # nothing listens there: the gateway is down


async def pending_payment(
    pool: asyncpg.Pool, settings: Settings, url: str | None = None
) -> tuple[uuid.UUID, uuid.UUID]:
    """A new merchant and its pending 5.00 USD payment (with its payment.created job)."""
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "shop", admin=False)
    payment_id = await DirectSubmitter(pool, settings).submit_payment(
        merchant, "5.00", "USD", uuid.uuid4().hex, url
    )
    return merchant, payment_id


async def claim_as_dying_worker(
    pool: asyncpg.Pool, settings: Settings, payment_id: uuid.UUID, lease_s: float
) -> Claim:
    """Commit a claim as a worker would, then never answer it (the worker dies)."""
    async with pool.acquire() as conn, transaction(conn, settings):
        claim = await claim_charge(conn, payment_id, "worker-that-dies", lease_s)
    assert isinstance(claim, Claim)
    return claim


async def attempt_states(pool: asyncpg.Pool, payment_id: uuid.UUID) -> list[tuple[int, str]]:
    rows = await pool.fetch(
        "SELECT attempt, state FROM charge_attempts WHERE payment_id = $1 ORDER BY attempt",
        payment_id,
    )
    return [(row["attempt"], row["state"]) for row in rows]


async def payment_status(pool: asyncpg.Pool, payment_id: uuid.UUID) -> str:
    status: str = await pool.fetchval("SELECT status FROM payments WHERE id = $1", payment_id)
    return status


async def announced_jobs(pool: asyncpg.Pool, payment_id: uuid.UUID) -> list[str]:
    rows = await pool.fetch(
        "SELECT topic FROM outbox WHERE topic <> 'payment.created'"
        " AND (payload->>'payment_id' = $1 OR payload->>'event_id' = $2) ORDER BY topic",
        str(payment_id),
        credit_event_id(payment_id),
    )
    return [row["topic"] for row in rows]
