"""Posting on the real PostgreSQL: credits, debits, replays and refusals."""

from __future__ import annotations

from decimal import Decimal

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.errors import AlreadyProcessed, NotFound
from payflow.ledger.accounts import set_account_status
from payflow.ledger.posting import post_event, posting_key
from payflow.ledger.records import AccountStatus, EventType, Outcome
from payflow.ledger.states import EventStatus, transition
from tests.integration.ledger.helpers import balance, count, new_account, new_event


async def test_deposit_credits_once_and_writes_one_ledger_row(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "dep-1", "1.5", EventType.DEPOSIT)

    first = await post_event(pool, settings, "dep-1")
    second = await post_event(pool, settings, "dep-1")

    assert (first.outcome, first.replayed, first.balance_after) == (
        Outcome.SUCCESS,
        False,
        Decimal("1.5"),
    )
    assert (second.outcome, second.replayed) == (Outcome.SUCCESS, True)
    assert await balance(pool, account) == Decimal("1.5")
    ledger = await pool.fetch("SELECT amount, balance_after, event_type FROM balance_events")
    assert [(r["amount"], r["balance_after"], r["event_type"]) for r in ledger] == [
        (Decimal("1.5"), Decimal("1.5"), "deposit")
    ]
    status = await pool.fetchval("SELECT status FROM payment_events WHERE event_id = 'dep-1'")
    assert status == "confirmed"
    outcome = await pool.fetchval(
        "SELECT outcome FROM processed_events WHERE idempotency_key = $1", posting_key("dep-1")
    )
    assert outcome == "success"


async def test_withdrawal_and_fee_debit(pool: asyncpg.Pool, settings: Settings) -> None:
    account = await new_account(pool, settings, opening="10")
    await new_event(pool, settings, account, "wd-1", "3.25", EventType.WITHDRAWAL)
    await new_event(
        pool, settings, account, "fee-1", "0.000000000000000001", EventType.WITHDRAWAL_FEE
    )

    await post_event(pool, settings, "wd-1")
    result = await post_event(pool, settings, "fee-1")

    assert result.balance_after == Decimal("6.749999999999999999")
    assert await balance(pool, account) == Decimal("6.749999999999999999")
    amounts = await pool.fetch("SELECT amount FROM balance_events ORDER BY id")
    assert [r["amount"] for r in amounts] == [Decimal("-3.25"), Decimal("-1E-18")]


async def test_insufficient_funds_is_terminal_and_recorded(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings, opening="1")
    await new_event(pool, settings, account, "wd-big", "1.000000000000000001", EventType.WITHDRAWAL)

    first = await post_event(pool, settings, "wd-big")
    again = await post_event(pool, settings, "wd-big")

    assert (first.outcome, first.replayed) == (Outcome.INSUFFICIENT_FUNDS, False)
    assert (again.outcome, again.replayed) == (Outcome.INSUFFICIENT_FUNDS, True)
    assert await balance(pool, account) == Decimal("1")
    assert await count(pool, "SELECT count(*) FROM balance_events") == 0
    assert await count(pool, "SELECT count(*) FROM dead_letter_queue") == 0
    row = await pool.fetchrow("SELECT status, retry_count FROM payment_events")
    assert (row["status"], row["retry_count"]) == ("failed", 0)


async def test_frozen_account_refuses_debits_but_takes_credits(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings, opening="5")
    async with pool.acquire() as conn, transaction(conn, settings):
        await set_account_status(conn, account, AccountStatus.FROZEN)
    await new_event(pool, settings, account, "wd-frozen", "1", EventType.WITHDRAWAL)
    await new_event(pool, settings, account, "dep-frozen", "2", EventType.DEPOSIT)

    refused = await post_event(pool, settings, "wd-frozen")
    credited = await post_event(pool, settings, "dep-frozen")

    assert refused.outcome is Outcome.ACCOUNT_FROZEN
    assert credited.outcome is Outcome.SUCCESS
    assert await balance(pool, account) == Decimal("7")


async def test_pending_event_is_walked_through_enqueued(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "dep-pending", "2", EventType.AIRDROP)
    result = await post_event(pool, settings, "dep-pending")
    assert result.outcome is Outcome.SUCCESS
    assert await pool.fetchval("SELECT status FROM payment_events") == "confirmed"


async def test_unknown_event_is_not_found_and_leaves_no_claim(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    with pytest.raises(NotFound):
        await post_event(pool, settings, "no-such-event")
    assert await count(pool, "SELECT count(*) FROM processed_events") == 0


async def test_failed_event_is_never_posted(pool: asyncpg.Pool, settings: Settings) -> None:
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "dep-dead", "2", EventType.DEPOSIT)
    async with pool.acquire() as conn, transaction(conn, settings):
        await transition(conn, "dep-dead", EventStatus.FAILED)
    with pytest.raises(AlreadyProcessed):
        await post_event(pool, settings, "dep-dead")
    assert await balance(pool, account) == Decimal("0")
    assert await count(pool, "SELECT count(*) FROM processed_events") == 0


async def test_replay_repairs_a_lagging_status(pool: asyncpg.Pool, settings: Settings) -> None:
    """A success recorded while the event still says enqueued becomes confirmed on replay."""
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "dep-lag", "4", EventType.DEPOSIT)
    async with pool.acquire() as conn, transaction(conn, settings):
        await transition(conn, "dep-lag", EventStatus.ENQUEUED)
        await conn.execute(
            "INSERT INTO processed_events (idempotency_key, event_id, outcome)"
            " VALUES ($1, 'dep-lag', 'success')",
            posting_key("dep-lag"),
        )
    result = await post_event(pool, settings, "dep-lag")
    assert (result.outcome, result.replayed) == (Outcome.SUCCESS, True)
    assert await pool.fetchval("SELECT status FROM payment_events") == "confirmed"
    assert await balance(pool, account) == Decimal("0")  # replay never re-applies


async def test_ledger_refuses_update_and_delete(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    """The triggers hold even for the owner (the app role lacks the privileges at all,
    see tests/integration/db/test_roles.py)."""
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "dep-x", "1", EventType.DEPOSIT)
    await post_event(pool, settings, "dep-x")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await owner_pool.execute("UPDATE balance_events SET amount = 100")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await owner_pool.execute("DELETE FROM balance_events")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await owner_pool.execute("TRUNCATE balance_events CASCADE")
    assert await pool.fetchval("SELECT amount FROM balance_events") == Decimal("1")


async def test_balance_check_constraint_is_named(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    with pytest.raises(asyncpg.CheckViolationError) as caught:  # the service may not write it
        await owner_pool.execute("UPDATE accounts SET balance = -1 WHERE id = $1", account)
    assert caught.value.constraint_name == "accounts_balance_non_negative"
