"""Exactly-once under real parallelism: separate OS processes behind a barrier."""

from __future__ import annotations

import multiprocessing
from decimal import Decimal

import asyncpg
import pytest

from payflow.config import Settings
from payflow.ledger.records import EventType
from tests.integration.ledger.helpers import balance, count, new_account, new_event
from tests.integration.ledger.workers import post_after_barrier

pytestmark = pytest.mark.slow


def _run_in_processes(database_url: str, batches: list[list[str]]) -> list[list[str]]:
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(len(batches))
        with context.Pool(len(batches)) as workers:
            return workers.starmap(
                post_after_barrier, [(database_url, batch, barrier) for batch in batches]
            )


async def test_ten_processes_deliver_the_same_deposit_once(
    pool: asyncpg.Pool, settings: Settings, database_url: str
) -> None:
    account = await new_account(pool, settings)
    await new_event(
        pool, settings, account, "dup-deposit", "0.123456789012345678", EventType.DEPOSIT
    )

    outcomes = _run_in_processes(database_url, [["dup-deposit"]] * 10)

    flat = [o for batch in outcomes for o in batch]
    assert flat.count("success") == 1
    assert flat.count("replayed") == 9
    assert await balance(pool, account) == Decimal("0.123456789012345678")
    assert await count(pool, "SELECT count(*) FROM balance_events") == 1
    assert await count(pool, "SELECT count(*) FROM processed_events") == 1
    assert await pool.fetchval("SELECT status FROM payment_events") == "confirmed"


async def test_twenty_processes_withdraw_from_one_account(
    pool: asyncpg.Pool, settings: Settings, database_url: str
) -> None:
    start = Decimal("10")
    account = await new_account(pool, settings, opening=str(start))
    for index in range(20):
        await new_event(pool, settings, account, f"wd-{index}", "0.75", EventType.WITHDRAWAL)

    outcomes = _run_in_processes(database_url, [[f"wd-{index}"] for index in range(20)])

    flat = [o for batch in outcomes for o in batch]
    successes = flat.count("success")
    assert successes == 13  # floor(10 / 0.75)
    assert flat.count("insufficient_funds") == 7
    final = await balance(pool, account)
    assert final == start - Decimal("0.75") * successes
    assert final >= 0
    debited = await pool.fetchval("SELECT -sum(amount) FROM balance_events")
    assert debited == Decimal("0.75") * successes <= start
    assert (
        await count(
            pool, "SELECT count(*) FROM processed_events WHERE outcome = 'insufficient_funds'"
        )
        == 7
    )
    assert await count(pool, "SELECT count(*) FROM payment_events WHERE status = 'failed'") == 7
