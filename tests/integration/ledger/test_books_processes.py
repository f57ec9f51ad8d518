"""One system account under real parallelism: OS processes behind a barrier post payment
credits to many merchants (every one against gateway:USD) and deposits of an asset whose
custody account does not exist yet, each event delivered by every process."""

from __future__ import annotations

import multiprocessing
import random
from decimal import Decimal

import asyncpg
import pytest

from payflow.config import Settings
from payflow.ledger.records import EventType
from tests.integration.ledger.books import assert_books_balance, system_balance
from tests.integration.ledger.helpers import new_account, new_event
from tests.integration.ledger.workers import post_after_barrier

pytestmark = pytest.mark.slow

PROCESSES = 6


async def test_processes_post_to_one_system_account_exactly_once(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings, database_url: str
) -> None:
    await owner_pool.execute("INSERT INTO assets (code, scale) VALUES ('RACE', 2)")
    merchants = [await new_account(pool, settings, asset="USD") for _ in range(4)]
    holders = [await new_account(pool, settings, asset="RACE") for _ in range(2)]
    events = []
    for index in range(24):
        event_id = f"pay-{index}"
        await new_event(
            pool, settings, merchants[index % 4], event_id, "1.25", EventType.PAYMENT_CREDIT, "USD"
        )
        events.append(event_id)
    for index in range(8):
        event_id = f"race-{index}"
        await owner_pool.execute(  # an asset the code's scale table does not know
            "INSERT INTO payment_events (event_id, account_id, amount, event_type)"
            " VALUES ($1, $2, 2, 'deposit')",
            event_id,
            holders[index % 2],
        )
        events.append(event_id)
    batches = [random.Random(seed).sample(events, len(events)) for seed in range(PROCESSES)]

    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(PROCESSES)
        with context.Pool(PROCESSES) as workers:
            outcomes = workers.starmap(
                post_after_barrier, [(database_url, batch, barrier) for batch in batches]
            )

    flat = [o for batch in outcomes for o in batch]
    assert flat.count("success") == len(events)
    assert flat.count("replayed") == len(events) * (PROCESSES - 1)
    assert await system_balance(pool, "gateway:USD") == Decimal("30")  # 24 x 1.25
    assert await system_balance(pool, "custody:external:RACE") == Decimal("16")
    assert (
        await pool.fetchval("SELECT count(*) FROM ledger_legs WHERE ledger_account = 'gateway:USD'")
        == 24
    )
    assert await pool.fetchval("SELECT count(*) FROM ledger_accounts WHERE asset = 'RACE'") == 1
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == len(events)
    assert await pool.fetchval("SELECT min(balance) FROM accounts") >= 0
    await assert_books_balance(pool)
