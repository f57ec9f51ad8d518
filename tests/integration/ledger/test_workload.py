"""A seeded random workload with duplicate deliveries leaves reconciliation clean."""

from __future__ import annotations

import asyncio
import random
from decimal import Decimal

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.posting import post_event
from payflow.ledger.recon import reconcile
from payflow.ledger.records import EventType, Outcome
from tests.integration.ledger.helpers import count, new_account, new_event


@pytest.mark.parametrize("seed", [1, 2])
async def test_random_workload_with_duplicates_reconciles(
    pool: asyncpg.Pool, settings: Settings, seed: int
) -> None:
    rng = random.Random(seed)
    accounts = [await new_account(pool, settings, opening=str(rng.randint(0, 5))) for _ in range(5)]
    expected = {
        a: await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", a) for a in accounts
    }
    events = []
    for index in range(120):
        event_type = rng.choice(list(EventType))
        amount = Decimal(rng.randint(1, 300)) / 100
        account = rng.choice(accounts)
        event_id = f"w{seed}-{index}"
        await new_event(pool, settings, account, event_id, str(amount), event_type)
        events.append((event_id, account, amount, event_type))

    deliveries = [e for e in events for _ in range(rng.randint(1, 3))]
    rng.shuffle(deliveries)
    results = await asyncio.gather(*(post_event(pool, settings, e[0]) for e in deliveries))

    fresh = {r.event_id: r.outcome for r in results if not r.replayed}
    assert set(fresh) == {e[0] for e in events}  # every event applied by exactly one delivery
    for event_id, account, amount, event_type in events:
        if fresh[event_id] is Outcome.SUCCESS:
            expected[account] += amount if event_type.is_credit else -amount
    for account, value in expected.items():
        assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account) == value
    successes = sum(1 for o in fresh.values() if o is Outcome.SUCCESS)
    assert await count(pool, "SELECT count(*) FROM balance_events") == successes

    full = await reconcile(pool, settings, full=True)
    recent = await reconcile(
        pool, settings, full=False, recent_minutes=settings.recon_recent_minutes
    )
    assert full.clean and full.accounts_checked == 5
    assert recent.clean


async def test_recon_reports_a_tampered_balance(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "t-1", "2", EventType.DEPOSIT)
    await post_event(pool, settings, "t-1")
    # The tampering is done behind the service's back (the owner's pool).
    async with owner_pool.acquire() as conn, transaction(conn, settings):
        await conn.execute("UPDATE accounts SET balance = balance + 1 WHERE id = $1", account)

    full = await reconcile(pool, settings, full=True)
    recent = await reconcile(
        pool, settings, full=False, recent_minutes=settings.recon_recent_minutes
    )

    assert not full.clean and not recent.clean
    assert [(m.balance, m.expected) for m in full.mismatches] == [(Decimal(3), Decimal(2))]


async def test_recon_reports_a_confirmed_event_without_ledger_row(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "ghost", "2", EventType.DEPOSIT)
    await owner_pool.execute("UPDATE payment_events SET status = 'confirmed'")
    report = await reconcile(pool, settings, full=True)
    assert report.confirmed_without_ledger == ["ghost"]
