"""Big numbers on the real PostgreSQL : a credit payflow
accepted can always post, an overflow that still happens is terminal and visible,
and debits of 38-digit amounts are exact."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import asyncpg
import pytest
from structlog.testing import capture_logs

from payflow.config import Settings
from payflow.db import migrate
from payflow.db.tx import transaction
from payflow.ledger.limits import LimitExceeded, LimitKind, check_limit, set_limits
from payflow.ledger.posting import post_event, posting_key
from payflow.ledger.recon import reconcile
from payflow.ledger.records import EventType, Outcome
from payflow.ledger.worker import notify_refusal
from payflow.money import InvalidAmount
from tests.conftest import OWNER_ROLE
from tests.integration.ledger.helpers import (
    NEAR_BALANCE_MAX,
    balance,
    count,
    new_account,
    new_event,
    open_at_balance_max,
)

SIXTY_E18 = "60000000000000000000"  # 6 * 10^19: two of them overflowed NUMERIC(38,18)


async def test_two_deposits_of_six_times_ten_to_nineteen_post_and_reconcile(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    for event_id in ("dep-big-1", "dep-big-2"):
        await new_event(pool, settings, account, event_id, SIXTY_E18, EventType.DEPOSIT)
        result = await post_event(pool, settings, event_id)
        assert result.outcome is Outcome.SUCCESS

    assert await balance(pool, account) == Decimal("120000000000000000000")
    after = await pool.fetch(
        "SELECT balance_after FROM balance_events WHERE account_id = $1 ORDER BY id", account
    )
    assert [r["balance_after"] for r in after] == [Decimal(SIXTY_E18), Decimal(12 * 10**19)]
    report = await reconcile(pool, settings, full=True)
    assert report.clean and report.accounts_checked == 1


async def test_a_later_credit_still_posts_on_top_of_the_largest_amount(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    """The RUB case from the issue: 99999999999999999999.99 then ordinary payments."""
    account = await new_account(pool, settings, asset="RUB")
    await new_event(
        pool, settings, account, "big", "99999999999999999999.99", EventType.PAYMENT_CREDIT, "RUB"
    )
    await new_event(pool, settings, account, "next", "10.00", EventType.PAYMENT_CREDIT, "RUB")
    assert (await post_event(pool, settings, "big")).outcome is Outcome.SUCCESS
    assert (await post_event(pool, settings, "next")).outcome is Outcome.SUCCESS
    assert await balance(pool, account) == Decimal("100000000000000000009.99")
    assert (await reconcile(pool, settings, full=True)).clean


async def test_a_38_digit_withdrawal_debits_exactly(pool: asyncpg.Pool, settings: Settings) -> None:
    """Unary minus in Python's default context rounded a 38-digit debit to 28 digits."""
    account = await new_account(pool, settings, opening="99999999999999999999.999999999999999999")
    amount = "12345678901234567890.123456789012345678"
    await new_event(pool, settings, account, "wd-exact", amount, EventType.WITHDRAWAL)

    result = await post_event(pool, settings, "wd-exact")

    assert result.outcome is Outcome.SUCCESS
    assert await balance(pool, account) == Decimal("87654321098765432109.876543210987654321")
    ledger_amount = await pool.fetchval("SELECT amount FROM balance_events")
    assert ledger_amount == Decimal("-" + amount)
    assert (await reconcile(pool, settings, full=True)).clean


async def test_an_overflow_is_a_terminal_recorded_outcome_with_an_alert(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    await open_at_balance_max(owner_pool, account)
    await new_event(pool, settings, account, "dep-overflow", "1", EventType.DEPOSIT)

    with capture_logs() as logs:
        first = await post_event(pool, settings, "dep-overflow")
    second = await post_event(pool, settings, "dep-overflow")

    assert (first.outcome, first.replayed) == (Outcome.AMOUNT_OVERFLOW, False)
    assert (second.outcome, second.replayed) == (Outcome.AMOUNT_OVERFLOW, True)
    event = await pool.fetchrow(
        "SELECT status, last_error FROM payment_events WHERE event_id = 'dep-overflow'"
    )
    assert event["status"] == "failed"
    assert event["last_error"].startswith("amount_overflow:")
    outcome = await pool.fetchval(
        "SELECT outcome FROM processed_events WHERE idempotency_key = $1",
        posting_key("dep-overflow"),
    )
    assert outcome == "amount_overflow"
    assert await balance(pool, account) == Decimal(NEAR_BALANCE_MAX)
    assert await count(pool, "SELECT count(*) FROM balance_events") == 0
    assert await count(pool, "SELECT count(*) FROM dead_letter_queue") == 0
    alerts = [entry for entry in logs if entry["event"] == "payflow.ledger.overflow"]
    assert len(alerts) == 1
    assert alerts[0]["log_level"] == "error" and alerts[0]["event_id"] == "dep-overflow"
    assert alerts[0]["detail"] == event["last_error"]
    assert (await reconcile(pool, settings, full=True)).clean


async def test_default_limits_fit_real_money(pool: asyncpg.Pool) -> None:
    rows = await pool.fetch(
        "SELECT code, max_payment, max_withdrawal, max_deposit FROM assets ORDER BY code"
    )
    limits = {r["code"]: (r["max_payment"], r["max_withdrawal"], r["max_deposit"]) for r in rows}
    billion = Decimal(10**9)
    for fiat in ("RUB", "USD", "EUR", "USDC", "USDT", "DAI"):
        assert limits[fiat] == (billion, billion, billion)
    assert limits["ETH"] == (Decimal(10**6),) * 3
    assert limits["WBTC"] == (Decimal(10**5),) * 3


async def test_check_limit_names_the_limit_and_the_asset(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    async with pool.acquire() as conn:
        await check_limit(conn, "ETH", LimitKind.DEPOSIT, Decimal(10**6))  # at the limit
        with pytest.raises(LimitExceeded) as refused:
            await check_limit(conn, "ETH", LimitKind.DEPOSIT, Decimal(SIXTY_E18))
    assert "max_deposit" in str(refused.value) and "ETH" in str(refused.value)
    assert refused.value.limit == Decimal(10**6)


async def test_an_operator_changes_a_limit(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    async with owner_pool.acquire() as conn, transaction(conn, settings):
        stored = await set_limits(conn, "RUB", payment="500.50")
    assert stored.max_payment == Decimal("500.50")
    assert stored.max_withdrawal == Decimal(10**9)  # untouched
    async with pool.acquire() as conn:
        await check_limit(conn, "RUB", LimitKind.PAYMENT, Decimal("500.50"))
        with pytest.raises(LimitExceeded, match=r"max_payment of RUB \(500\.50\)"):
            await check_limit(conn, "RUB", LimitKind.PAYMENT, Decimal("500.51"))
    async with owner_pool.acquire() as conn:
        with pytest.raises(InvalidAmount, match="--deposit"):
            await set_limits(conn, "RUB", deposit="0.001")
        with pytest.raises(InvalidAmount, match="--withdrawal"):
            await set_limits(conn, "RUB", withdrawal="100000000000000000000")


@pytest.mark.slow
async def test_migration_0008_keeps_data_down_and_up(
    pool: asyncpg.Pool, settings: Settings, migration_url: str
) -> None:
    """Down to 0007 and back keeps balances and limits' defaults; a balance of 10^20 or
    more refuses the downgrade (it would not fit NUMERIC(38,18))."""
    account = await new_account(pool, settings, opening="99999999999999999999.5")
    await new_event(pool, settings, account, "dep-wide", "1", EventType.DEPOSIT)
    await post_event(pool, settings, "dep-wide")
    await pool.close()  # alembic needs the tables without our pooled sessions

    database_url = migration_url  # schema changes and tampering: the migration login
    with pytest.raises(RuntimeError, match="10\\^20"):
        await asyncio.to_thread(
            migrate.downgrade, database_url, "0007_pipeline_sweeps", owner_role=OWNER_ROLE
        )

    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("SET session_replication_role = replica")  # test set-up only
        await conn.execute("DELETE FROM ledger_legs")
        await conn.execute("DELETE FROM ledger_transfers")
        await conn.execute("DELETE FROM balance_events")
        await conn.execute("DELETE FROM processed_events")
        await conn.execute("UPDATE accounts SET balance = 12.5, initial_balance = 12.5")
    finally:
        await conn.close()
    await asyncio.to_thread(
        migrate.downgrade, database_url, "0007_pipeline_sweeps", owner_role=OWNER_ROLE
    )
    await asyncio.to_thread(migrate.upgrade, database_url, owner_role=OWNER_ROLE)

    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT balance FROM accounts") == Decimal("12.5")
        limits = await conn.fetchrow(
            "SELECT max_payment, max_deposit FROM assets WHERE code = 'ETH'"
        )
        assert tuple(limits) == (Decimal(10**6), Decimal(10**6))
        width = await conn.fetchval(
            "SELECT numeric_precision FROM information_schema.columns"
            " WHERE table_name = 'accounts' AND column_name = 'balance'"
        )
        assert width == 78
    finally:
        await conn.close()


async def test_refusal_notification_carries_the_exact_38_digit_amount(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    """normalize() in the default context rounded the notification's amount to 28 digits."""
    account = await new_account(pool, settings)
    amount = "12345678901234567890.123456789012345678"
    await new_event(pool, settings, account, "wd-poor", amount, EventType.WITHDRAWAL)

    result = await post_event(pool, settings, "wd-poor", on_refusal=notify_refusal)

    assert result.outcome is Outcome.INSUFFICIENT_FUNDS
    payload = await pool.fetchval(
        "SELECT payload FROM outbox WHERE topic = 'notification.insufficient_funds'"
    )
    assert payload["amount"] == amount
