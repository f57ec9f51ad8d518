"""Postings sent together (`payflow.ledger.together.PostingCoalescer`): the success path of
concurrent postings in one statement and one commit, on the real PostgreSQL. Each event
ends exactly as alone (one claim, one journal row, balanced legs); a batch shares commits;
an event the batch cannot decide is decided alone without costing the others."""

from __future__ import annotations

import asyncio
import multiprocessing
import random
from decimal import Decimal

import asyncpg
import structlog

from payflow.config import Settings
from payflow.ledger.posting import post_event
from payflow.ledger.records import EventType, Outcome
from payflow.ledger.together import PostingCoalescer
from tests.integration.ledger.books import assert_books_balance
from tests.integration.ledger.helpers import balance, count, new_account, new_event
from tests.integration.ledger.workers import post_together_after_barrier

PROCESSES = 4


async def _journal(pool: asyncpg.Pool, prefix: str) -> tuple[int, int, int, int]:
    """(journal rows, their distinct commits, posting claims, postings whose legs do not
    sum to zero) of the events whose ids start with `prefix`."""
    row = await pool.fetchrow(
        "SELECT count(*) AS rows, count(DISTINCT b.xmin::text) AS commits,"
        " (SELECT count(*) FROM processed_events WHERE event_id LIKE $1 || '%') AS claims,"
        " count(*) FILTER (WHERE b.amount + coalesce((SELECT sum(l.amount) FROM ledger_legs l"
        "                  WHERE l.source_event_id = b.source_event_id), 0) <> 0) AS unbalanced"
        " FROM balance_events b WHERE b.source_event_id LIKE $1 || '%'",
        prefix,
    )
    assert row is not None
    return row["rows"], row["commits"], row["claims"], row["unbalanced"]


async def test_concurrent_postings_share_commits_and_each_posts_once(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    accounts = [await new_account(pool, settings) for _ in range(6)]
    events = []
    for i in range(30):  # five deposits per account, plus the same events delivered twice
        account = accounts[i % len(accounts)]
        await new_event(pool, settings, account, f"tg-{i}", "1.5", EventType.DEPOSIT)
        events.append(f"tg-{i}")
    together = PostingCoalescer(pool, settings)
    results = await asyncio.gather(
        *(post_event(pool, settings, e, together=together) for e in events + events[:10])
    )
    applied = [r for r in results if not r.replayed]
    assert sorted(r.event_id for r in applied) == sorted(events)  # each once
    assert all(r.outcome is Outcome.SUCCESS for r in results)
    rows, commits, claims, unbalanced = await _journal(pool, "tg-")
    assert (rows, claims, unbalanced) == (30, 30, 0)
    assert commits < 30  # shared: never a commit per posting
    for account in accounts:
        assert await balance(pool, account) == Decimal("7.5")


async def test_a_refused_debit_in_a_batch_is_decided_alone(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    rich = await new_account(pool, settings, opening="10")
    poor = await new_account(pool, settings)
    await new_event(pool, settings, poor, "tr-poor", "1", EventType.WITHDRAWAL)
    for i in range(8):
        await new_event(pool, settings, rich, f"tr-{i}", "1", EventType.WITHDRAWAL)
    together = PostingCoalescer(pool, settings)
    ids = ["tr-0", "tr-1", "tr-poor", *(f"tr-{i}" for i in range(2, 8))]
    with structlog.testing.capture_logs() as logs:
        posted = await asyncio.gather(
            *(post_event(pool, settings, e, together=together) for e in ids)
        )
    results = {r.event_id: r for r in posted}
    # The batch was refused as a whole (the poor account's debit), then each sent alone.
    refused = [e for e in logs if e["event"] == "payflow.ledger.batch_alone"]
    assert refused and refused[0]["sqlstate"] == "PF001"
    assert results["tr-poor"].outcome is Outcome.INSUFFICIENT_FUNDS
    assert all(results[f"tr-{i}"].outcome is Outcome.SUCCESS for i in range(8))
    assert await balance(pool, rich) == Decimal("2")
    assert await balance(pool, poor) == Decimal("0")
    failed = await pool.fetchval("SELECT status FROM payment_events WHERE event_id = 'tr-poor'")
    assert failed == "failed"
    assert await count(pool, "SELECT count(*) FROM balance_events WHERE account_id = $1", poor) == 0


async def test_one_hot_account_takes_its_lock_once_per_batch(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    for i in range(40):
        await new_event(pool, settings, account, f"th-{i}", "0.25", EventType.DEPOSIT)
    together = PostingCoalescer(pool, settings, max_in_flight=1)
    results = await asyncio.gather(
        *(post_event(pool, settings, f"th-{i}", together=together) for i in range(40))
    )
    # Each posting's balance after is its own step on the account: 0.25, 0.50, ... 10.00.
    assert sorted(r.balance_after for r in results) == [Decimal("0.25") * n for n in range(1, 41)]
    assert await balance(pool, account) == Decimal("10")
    rows, commits, claims, unbalanced = await _journal(pool, "th-")
    assert (rows, claims, unbalanced) == (40, 40, 0)
    assert commits <= 2  # they queue before the first statement runs: shared commits


async def test_processes_posting_together_post_each_event_once_and_never_overdraw(
    pool: asyncpg.Pool, settings: Settings, database_url: str
) -> None:
    """Four OS processes behind a barrier each deliver every event at once through their
    own coalescer (batches of several accounts, in different orders per process): deposits
    and withdrawals on three accounts, more withdrawn than some hold. Each event is decided
    once, no balance goes negative, every balance equals its journal, the books balance."""
    accounts = [await new_account(pool, settings, opening="3") for _ in range(3)]
    events = []
    for i in range(36):  # per account: 4 withdrawals of 2, 8 deposits of 0.5, mixed
        kind = EventType.WITHDRAWAL if (i // 3) % 3 == 0 else EventType.DEPOSIT
        amount = "2" if kind is EventType.WITHDRAWAL else "0.5"
        await new_event(pool, settings, accounts[i % 3], f"tp-{i}", amount, kind)
        events.append(f"tp-{i}")
    orders = [random.Random(seed).sample(events, len(events)) for seed in range(PROCESSES)]
    context = multiprocessing.get_context("spawn")

    def run() -> list[list[str]]:
        with context.Manager() as manager:
            barrier = manager.Barrier(PROCESSES)
            with context.Pool(PROCESSES) as workers:
                return workers.starmap(
                    post_together_after_barrier, [(database_url, o, barrier) for o in orders]
                )

    outcomes = [o for batch in await asyncio.to_thread(run) for o in batch]
    decided = [o for o in outcomes if o not in ("replayed", "already_processed")]
    assert len(decided) == len(events)  # each event decided by exactly one delivery
    assert set(decided) == {"success", "insufficient_funds"}  # 7 held per account, 8 asked
    claims = await count(pool, "SELECT count(*) FROM processed_events WHERE event_id LIKE 'tp-%'")
    assert claims == len(events)
    for account in accounts:
        journal = await pool.fetchval(
            "SELECT coalesce(sum(amount), 0) FROM balance_events WHERE account_id = $1", account
        )
        assert await balance(pool, account) == Decimal(3) + journal >= 0  # opening + postings
    assert await pool.fetchval("SELECT min(balance) FROM accounts") >= 0
    await assert_books_balance(pool)


async def test_a_posting_right_after_another_never_waits_on_an_ended_drain(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    """Each caller posts again as soon as it has its answer, while the drain that answered
    it is ending: the next posting starts its own drain instead of waiting for one."""
    account = await new_account(pool, settings)
    for i in range(12):
        await new_event(pool, settings, account, f"ts-{i}", "1", EventType.DEPOSIT)
    together = PostingCoalescer(pool, settings, max_in_flight=1)

    async def chain(start: int) -> list[Decimal | None]:
        return [
            (await asyncio.wait_for(together.post(f"ts-{i}"), timeout=10)).balance_after  # type: ignore[union-attr]
            for i in range(start, 12, 3)
        ]

    chains = await asyncio.gather(chain(0), chain(1), chain(2))
    assert sorted(b for c in chains for b in c) == [Decimal(n) for n in range(1, 13)]
    assert await balance(pool, account) == Decimal(12)
