"""Double-entry books on the real PostgreSQL: each movement's legs, the chart of accounts
created when needed, and unbalanced writes refused at commit whoever sends them."""

from __future__ import annotations

import uuid
from decimal import Decimal

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.errors import InsufficientFunds
from payflow.ledger.accounts import store_event
from payflow.ledger.books import chart_of_accounts
from payflow.ledger.posting import post_event, post_within
from payflow.ledger.recon import reconcile
from payflow.ledger.records import EventType, Outcome
from tests.integration.ledger.books import assert_books_balance, legs_of, system_balance
from tests.integration.ledger.helpers import balance, new_account, new_event


async def test_each_movement_posts_its_counterparty_leg(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    customer = await new_account(pool, settings, opening="10")
    merchant = await new_account(pool, settings, asset="USD")
    await new_event(pool, settings, customer, "dep-1", "2.5", EventType.DEPOSIT)
    await new_event(pool, settings, customer, "rev-1", "0.5", EventType.DEPOSIT_REVERSAL)
    await new_event(pool, settings, merchant, "pay-1", "12.34", EventType.PAYMENT_CREDIT, "USD")
    for event_id in ("dep-1", "rev-1", "pay-1"):
        assert (await post_event(pool, settings, event_id)).outcome is Outcome.SUCCESS
    # A payout's debit and fee commit together through the full path.
    async with pool.acquire() as conn, transaction(conn, settings):
        for event_id, amount, kind in (
            ("wd-1", Decimal("3"), EventType.WITHDRAWAL),
            ("fee-1", Decimal("0.01"), EventType.WITHDRAWAL_FEE),
        ):
            await store_event(
                conn, event_id=event_id, account_id=customer, amount=amount, event_type=kind
            )
            await post_within(conn, event_id)

    c = str(customer)
    assert await legs_of(pool, "dep-1") == [
        (c, Decimal("2.5")),
        ("custody:external:ETH", Decimal("-2.5")),
    ]
    assert await legs_of(pool, "rev-1") == [
        (c, Decimal("-0.5")),
        ("custody:external:ETH", Decimal("0.5")),
    ]
    assert await legs_of(pool, "pay-1") == [
        (str(merchant), Decimal("12.34")),
        ("gateway:USD", Decimal("-12.34")),
    ]
    assert await legs_of(pool, "wd-1") == [
        (c, Decimal("-3")),
        ("custody:external:ETH", Decimal("3")),
    ]
    assert await legs_of(pool, "fee-1") == [(c, Decimal("-0.01")), ("fees:ETH", Decimal("0.01"))]
    opening = await pool.fetch(
        "SELECT coalesce(account_id::text, ledger_account) AS account, amount FROM ledger_legs"
        " WHERE transfer_id IS NOT NULL ORDER BY amount DESC"
    )
    assert [(r["account"], r["amount"]) for r in opening] == [
        (c, Decimal("10")),
        ("opening:ETH", Decimal("-10")),
    ]
    assert await balance(pool, customer) == Decimal("8.99")
    assert await system_balance(pool, "custody:external:ETH") == Decimal("-1")  # 2.5-0.5-3
    assert await system_balance(pool, "fees:ETH") == Decimal("0.01")
    assert await system_balance(pool, "gateway:USD") == Decimal("12.34")
    assert await system_balance(pool, "opening:ETH") == Decimal("10")
    await assert_books_balance(pool)
    report = await reconcile(pool, settings, full=True)
    assert report.clean
    assert {line.asset for line in report.trial_balance} == {"ETH", "USD"}
    async with pool.acquire() as conn:
        chart = {a.code: a for a in await chart_of_accounts(conn)}
    assert chart["fees:ETH"].balance == Decimal("0.01") and chart["fees:ETH"].legs == 1
    assert chart["gateway:USD"].normal_side == "debit"
    assert {"reorg_loss:ETH", "adjustments:ETH", "network_fees:ETH_MAINNET:ETH"} <= set(chart)


async def test_a_refused_debit_writes_no_leg_on_either_side(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings, opening="1")
    await new_event(pool, settings, account, "wd-big", "2", EventType.WITHDRAWAL)
    assert (await post_event(pool, settings, "wd-big")).outcome is Outcome.INSUFFICIENT_FUNDS
    async with pool.acquire() as conn:
        with pytest.raises(InsufficientFunds):
            async with transaction(conn, settings):
                await store_event(
                    conn,
                    event_id="wd-big-2",
                    account_id=account,
                    amount=Decimal(5),
                    event_type=EventType.WITHDRAWAL,
                )
                await post_within(conn, "wd-big-2")
    assert await legs_of(pool, "wd-big") == []
    assert (
        await pool.fetchval("SELECT count(*) FROM ledger_legs WHERE source_event_id IS NOT NULL")
        == 0
    )
    await assert_books_balance(pool)


async def test_chain_deposits_and_payouts_post_to_their_chains_custody(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings, opening="5")
    tx_hash = "0x" + "ab" * 32
    transfer = f"ETH_MAINNET:{tx_hash}:-1"
    await owner_pool.execute(
        "INSERT INTO chain_deposits (transfer_id, chain, tx_hash, position, to_address, units,"
        " account_id, asset, amount, block_number, block_hash, sources)"
        " VALUES ($1, 'ETH_MAINNET', $2, -1, '0x' || repeat('cd', 20), 10, $3, 'ETH', 1, 7, $2,"
        " ARRAY['scanner'])",
        transfer,
        tx_hash,
        account,
    )
    merchant = await owner_pool.fetchval(
        "INSERT INTO merchants (name, webhook_secret) VALUES ('m', 'whsec_x') RETURNING id"
    )
    payout = await owner_pool.fetchval(
        "INSERT INTO payouts (merchant_id, idempotency_key, account_id, asset, chain,"
        " to_address, decimals, amount, fee_hold)"
        " VALUES ($1, 'k', $2, 'ETH', 'ETH_MAINNET', '0x' || repeat('ef', 20), 18, 1, 0)"
        " RETURNING id",
        merchant,
        account,
    )
    await new_event(pool, settings, account, f"chain:{transfer}", "1", EventType.DEPOSIT)
    await new_event(pool, settings, account, f"reorg:{transfer}", "1", EventType.DEPOSIT_REVERSAL)
    await new_event(pool, settings, account, f"po:{payout}", "2", EventType.WITHDRAWAL)
    for event_id in (f"chain:{transfer}", f"reorg:{transfer}", f"po:{payout}"):
        assert (await post_event(pool, settings, event_id)).outcome is Outcome.SUCCESS
        assert (await legs_of(pool, event_id))[1][0] == "custody:ETH_MAINNET:ETH"
    assert await system_balance(pool, "custody:ETH_MAINNET:ETH") == Decimal("-2")
    await assert_books_balance(pool)


async def test_a_new_asset_gets_its_accounts_at_its_first_posting(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    await owner_pool.execute("INSERT INTO assets (code, scale) VALUES ('NEWCOIN', 8)")
    account = await new_account(pool, settings, asset="NEWCOIN", opening="3")
    async with pool.acquire() as conn, transaction(conn, settings):
        await store_event(
            conn,
            event_id="dep-new",
            account_id=account,
            amount=Decimal(1),
            event_type=EventType.DEPOSIT,
        )
    assert (await post_event(pool, settings, "dep-new")).outcome is Outcome.SUCCESS
    codes = await pool.fetch("SELECT code FROM ledger_accounts WHERE asset = 'NEWCOIN'")
    assert {r["code"] for r in codes} == {"opening:NEWCOIN", "custody:external:NEWCOIN"}
    await assert_books_balance(pool)


async def _confirmed_event(conn: asyncpg.Connection, account: uuid.UUID, event_id: str) -> None:
    await conn.execute(
        "INSERT INTO payment_events (event_id, account_id, amount, event_type, status)"
        " VALUES ($1, $2, 5, 'deposit', 'confirmed')",
        event_id,
        account,
    )


async def test_an_unbalanced_journal_write_is_refused_at_commit(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    """Whoever writes: money written on one side only never commits. (The service's own
    role may not write the journal at all since migration 0032, so the migration login
    tries here; test_definer_postings.py shows the service's role refused outright.)"""
    account = await new_account(pool, settings)
    async with owner_pool.acquire() as conn:
        # A customer leg with no counterparty: the statement passes, the commit refuses.
        tx = conn.transaction()
        await tx.start()
        await _confirmed_event(conn, account, "forged-1")
        await conn.execute(
            "INSERT INTO balance_events (account_id, amount, event_type, source_event_id,"
            " balance_after) VALUES ($1, 5, 'deposit', 'forged-1', 5)",
            account,
        )
        await conn.execute("UPDATE accounts SET balance = 5 WHERE id = $1", account)
        with pytest.raises(asyncpg.CheckViolationError, match="unbalanced posting") as refused:
            await tx.commit()
        assert refused.value.constraint_name == "ledger_posting_balanced"
        # Legs that do not sum to zero.
        with pytest.raises(asyncpg.CheckViolationError, match="sum to 1"):
            async with conn.transaction():
                await _confirmed_event(conn, account, "forged-2")
                await conn.execute(
                    "INSERT INTO balance_events (account_id, amount, event_type,"
                    " source_event_id, balance_after) VALUES ($1, 5, 'deposit', 'forged-2', 5)",
                    account,
                )
                await conn.execute(
                    "INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind)"
                    " VALUES ('forged-2', 'custody:external:ETH', -4, 'deposit')"
                )
        # A counterparty that is no account of the chart.
        with pytest.raises(asyncpg.CheckViolationError, match="unknown account"):
            async with conn.transaction():
                await _confirmed_event(conn, account, "forged-3")
                await conn.execute(
                    "INSERT INTO balance_events (account_id, amount, event_type,"
                    " source_event_id, balance_after) VALUES ($1, 5, 'deposit', 'forged-3', 5)",
                    account,
                )
                await conn.execute(
                    "INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind)"
                    " VALUES ('forged-3', 'custody:nowhere:ETH', -5, 'deposit')"
                )
        # A system leg alone, even with SET CONSTRAINTS ALL IMMEDIATE: it names no customer
        # leg, refused at once by its key.
        with pytest.raises(asyncpg.ForeignKeyViolationError) as lone:
            async with conn.transaction():
                await conn.execute("SET CONSTRAINTS ALL IMMEDIATE")
                await _confirmed_event(conn, account, "forged-4")
                await conn.execute(
                    "INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind)"
                    " VALUES ('forged-4', 'fees:ETH', 5, 'withdrawal_fee')"
                )
        assert lone.value.constraint_name == "ledger_legs_event_customer_fkey"
    assert await balance(pool, account) == 0
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 0
    assert await pool.fetchval("SELECT count(*) FROM ledger_legs") == 0
    await assert_books_balance(pool)
    assert (await reconcile(pool, settings, full=True)).clean


async def test_a_posted_event_takes_no_second_leg_on_either_side(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    """After a posting committed, neither side can be added to: a second counterparty leg
    breaks the one-leg key at once; a second customer leg (another type) is unbalanced at
    commit; both together are still refused by the key."""
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "dep-posted", "5", EventType.DEPOSIT)
    assert (await post_event(pool, settings, "dep-posted")).outcome is Outcome.SUCCESS
    before = await owner_pool.fetchval("SELECT count(*) FROM ledger_legs")
    async with owner_pool.acquire() as conn:
        with pytest.raises(asyncpg.UniqueViolationError) as twice:
            await conn.execute(
                "INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind)"
                " VALUES ('dep-posted', 'custody:external:ETH', 5, 'deposit')"
            )
        assert twice.value.constraint_name == "ledger_legs_event_leg_unique"
        with pytest.raises(asyncpg.CheckViolationError, match="unbalanced posting"):
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO balance_events (account_id, amount, event_type,"
                    " source_event_id, balance_after) VALUES ($1, 5, 'airdrop', 'dep-posted', 10)",
                    account,
                )
        with pytest.raises(asyncpg.UniqueViolationError):
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO balance_events (account_id, amount, event_type,"
                    " source_event_id, balance_after) VALUES ($1, 5, 'airdrop', 'dep-posted', 10)",
                    account,
                )
                await conn.execute(
                    "INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind)"
                    " VALUES ('dep-posted', 'custody:external:ETH', -5, 'airdrop')"
                )
    assert await owner_pool.fetchval("SELECT count(*) FROM ledger_legs") == before
    assert await balance(pool, account) == 5
    await assert_books_balance(pool)


async def test_the_books_are_append_only(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings, opening="1")
    for conn_pool in (pool, owner_pool):
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn_pool.execute("UPDATE ledger_legs SET amount = 100")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn_pool.execute("DELETE FROM ledger_transfers")
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await owner_pool.execute("TRUNCATE ledger_legs CASCADE")
    with pytest.raises(asyncpg.UniqueViolationError, match="ledger_transfers_reference_unique"):
        await owner_pool.execute("SELECT ledger_post_opening($1, 1)", account)
    assert await balance(pool, account) == 1
