"""`claim_fresh_webhook`: a webhook job's first send claims its lease in one autocommitted
statement, on the real database; every other case writes nothing and is left to the full
claim (duplicates, retries of an owned chain, a delivered, dead or pending job)."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from payflow.db.queries import load_queries
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.webhooks.test_webhook_leases import _final_payment

SQL = load_queries("payflow.webhooks")
LEASE = ("webhook_lease_token", "webhook_chain_message", "webhook_chain_attempt")


async def _claim(pool: asyncpg.Pool, payment_id: uuid.UUID, token: str, message: str):
    return await pool.fetchrow(
        SQL["claim_fresh_webhook"], payment_id, token, 30.0, message, 1, 2000
    )


async def _lease(pool: asyncpg.Pool, payment_id: uuid.UUID) -> tuple:
    row = await pool.fetchrow(
        "SELECT webhook_lease_token, webhook_chain_message, webhook_chain_attempt,"
        " webhook_lease_until > clock_timestamp() AS live FROM payments WHERE id = $1",
        payment_id,
    )
    return tuple(row)


async def test_the_first_send_takes_the_lease_and_the_next_finds_it_taken(
    pool: asyncpg.Pool, submitter: DirectSubmitter, merchant: tuple[uuid.UUID, str]
) -> None:
    payment_id = await _final_payment(pool, submitter, merchant[0], "http://127.0.0.1:9/hook")
    row = await _claim(pool, payment_id, "token-a", "m-1")
    assert row is not None
    assert (row["id"], row["status"], row["webhook_url"]) == (
        payment_id,
        "succeeded",
        "http://127.0.0.1:9/hook",
    )
    assert row["webhook_secret"] and row["scale"] == 2
    assert await _lease(pool, payment_id) == ("token-a", "m-1", 1, True)
    # A copy of the message, or another chain: the full claim judges it; nothing written.
    assert await _claim(pool, payment_id, "token-b", "m-2") is None
    assert await _lease(pool, payment_id) == ("token-a", "m-1", 1, True)


@pytest.mark.parametrize(
    "change",
    [
        "status = 'pending', processed_at = NULL",
        "webhook_delivered_at = now()",
        "webhook_dead_at = now()",
        "webhook_url = NULL",
        "webhook_chain_message = 'm-0', webhook_chain_attempt = 2",
    ],
    ids=["pending", "delivered", "dead", "no-url", "owned"],
)
async def test_every_other_job_is_left_to_the_full_claim(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    change: str,
) -> None:
    payment_id = await _final_payment(pool, submitter, merchant[0], "http://127.0.0.1:9/hook")
    await owner_pool.execute(f"UPDATE payments SET {change} WHERE id = $1", payment_id)
    before = await _lease(pool, payment_id)
    assert await _claim(pool, payment_id, "token-a", "m-1") is None
    assert await _lease(pool, payment_id) == before
