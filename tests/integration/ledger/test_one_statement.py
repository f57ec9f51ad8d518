"""The ledger's one-statement success path (`ledger_post_success`, migration 0020).

It commits a success by itself, or writes nothing and leaves the decision to the full
path: these tests pin both halves on the real PostgreSQL, by rows and balances.
"""

from __future__ import annotations

from decimal import Decimal

import asyncpg

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import set_account_status
from payflow.ledger.posting import post_event, post_in_one_statement, posting_key
from payflow.ledger.records import AccountStatus, EventType, Outcome
from payflow.ledger.states import EventStatus, transition
from tests.integration.ledger.helpers import (
    balance,
    count,
    new_account,
    new_event,
    open_at_balance_max,
)


async def _rows(pool: asyncpg.Pool, event_id: str) -> tuple[str, int, int]:
    """(event status, posting claims, ledger rows) of one event."""
    status = await pool.fetchval("SELECT status FROM payment_events WHERE event_id = $1", event_id)
    claims = await count(
        pool,
        "SELECT count(*) FROM processed_events WHERE idempotency_key = $1",
        posting_key(event_id),
    )
    ledger = await count(
        pool, "SELECT count(*) FROM balance_events WHERE source_event_id = $1", event_id
    )
    return status, claims, ledger


async def test_a_pending_credit_commits_in_one_statement_and_a_duplicate_writes_nothing(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings, opening="1")
    await new_event(pool, settings, account, "dep-fast", "2.5", EventType.DEPOSIT)

    async with pool.acquire() as conn:  # autocommit: no transaction around it
        first = await post_in_one_statement(conn, settings, "dep-fast")
        duplicate = await post_in_one_statement(conn, settings, "dep-fast")

    assert first is not None
    assert (first.outcome, first.replayed, first.balance_after) == (
        Outcome.SUCCESS,
        False,
        Decimal("3.5"),
    )
    assert duplicate is None
    assert await _rows(pool, "dep-fast") == ("confirmed", 1, 1)
    assert await balance(pool, account) == Decimal("3.5")
    outcome = await pool.fetchval(
        "SELECT outcome FROM processed_events WHERE idempotency_key = $1",
        posting_key("dep-fast"),
    )
    assert outcome == "success"
    # The full path answers the duplicate as a replay of the committed success.
    replay = await post_event(pool, settings, "dep-fast")
    assert (replay.outcome, replay.replayed) == (Outcome.SUCCESS, True)
    assert await balance(pool, account) == Decimal("3.5")


async def test_a_refused_debit_writes_nothing_and_the_full_path_records_the_refusal(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings, opening="1")
    over = "1.000000000000000001"
    await new_event(pool, settings, account, "wd-over", over, EventType.WITHDRAWAL)

    async with pool.acquire() as conn:
        assert await post_in_one_statement(conn, settings, "wd-over") is None
    assert await _rows(pool, "wd-over") == ("pending", 0, 0)
    assert await balance(pool, account) == Decimal("1")

    result = await post_event(pool, settings, "wd-over")
    assert (result.outcome, result.replayed) == (Outcome.INSUFFICIENT_FUNDS, False)
    assert await _rows(pool, "wd-over") == ("failed", 1, 0)


async def test_a_frozen_account_refuses_a_withdrawal_but_takes_a_credit(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings, opening="5")
    await new_event(pool, settings, account, "wd-frozen", "1", EventType.WITHDRAWAL)
    await new_event(pool, settings, account, "dep-frozen", "2", EventType.DEPOSIT)
    async with pool.acquire() as conn, transaction(conn, settings):
        await set_account_status(conn, account, AccountStatus.FROZEN)

    async with pool.acquire() as conn:
        refused = await post_in_one_statement(conn, settings, "wd-frozen")
        credited = await post_in_one_statement(conn, settings, "dep-frozen")

    assert refused is None
    assert await _rows(pool, "wd-frozen") == ("pending", 0, 0)
    assert credited is not None and credited.balance_after == Decimal("7")
    result = await post_event(pool, settings, "wd-frozen")
    assert result.outcome is Outcome.ACCOUNT_FROZEN
    assert await balance(pool, account) == Decimal("7")


async def test_an_event_that_cannot_be_confirmed_leaves_no_claim_behind(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "dep-failed", "1", EventType.DEPOSIT)
    async with pool.acquire() as conn, transaction(conn, settings):
        await transition(conn, "dep-failed", EventStatus.FAILED)  # e.g. by recovery

    async with pool.acquire() as conn:
        assert await post_in_one_statement(conn, settings, "dep-failed") is None

    assert await _rows(pool, "dep-failed") == ("failed", 0, 0)
    assert await balance(pool, account) == Decimal("0")


async def test_an_overflow_raises_and_leaves_no_claim_behind(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    await open_at_balance_max(owner_pool, account)
    await new_event(pool, settings, account, "dep-huge", "1", EventType.DEPOSIT)

    async with pool.acquire() as conn:
        try:
            await post_in_one_statement(conn, settings, "dep-huge")
        except asyncpg.NumericValueOutOfRangeError:
            pass
        else:
            raise AssertionError("a balance past NUMERIC(78, 18) must not commit")

    assert await _rows(pool, "dep-huge") == ("pending", 0, 0)
    result = await post_event(pool, settings, "dep-huge")  # the full path records it
    assert result.outcome is Outcome.AMOUNT_OVERFLOW
    assert await _rows(pool, "dep-huge") == ("failed", 1, 0)
