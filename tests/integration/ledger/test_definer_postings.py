"""Only the posting functions move money (migration 0032), tried as the service's own role.

`pool` logs in as the app role (DATABASE_URL in production). Every direct write below that
would create or move money is refused by PostgreSQL's privilege checks; the SECURITY
DEFINER posting functions refuse arguments that are not the database's own records; and
the service's postings (a deposit on both paths, a payout's hold and its release, a
payment's finalize with its credit) still work as that role.
"""

from __future__ import annotations

import uuid
from decimal import Decimal

import asyncpg
import pytest

from payflow.api.auth import create_merchant
from payflow.chain.payouts.holds import SQL as PAYOUT_SQL
from payflow.config import Settings
from payflow.db.tx import StatementBounds, transaction
from payflow.ledger.posting import post_event, post_within, posting_key, success_path_args
from payflow.ledger.records import EventType, Outcome
from payflow.ledger.states import SQL as LEDGER_SQL
from payflow.payments.finalize import credit_event_id, finalize_answered
from payflow.payments.gateway import ChargeResult
from tests.conftest import APP_ROLE
from tests.integration.ledger.books import assert_books_balance
from tests.integration.ledger.helpers import balance, new_account, new_event
from tests.integration.payments.test_finalize_answered import _claimed
from tests.integration.payments.test_held_credit import _merchant_with_account

INVALID = asyncpg.InvalidParameterValueError


async def _money(owner_pool: asyncpg.Pool) -> tuple[object, ...]:
    """Everything that is money: balances, holds, opening amounts, the journal's size."""
    row = await owner_pool.fetchrow(
        "SELECT (SELECT coalesce(sum(balance), 0) FROM accounts),"
        " (SELECT coalesce(sum(held), 0) FROM accounts),"
        " (SELECT coalesce(sum(initial_balance), 0) FROM accounts),"
        " (SELECT count(*) FROM accounts),"
        " (SELECT count(*) FROM balance_events), (SELECT count(*) FROM ledger_legs),"
        " (SELECT count(*) FROM ledger_transfers), (SELECT count(*) FROM ledger_accounts)"
    )
    assert row is not None
    return tuple(row)


async def _funded(pool: asyncpg.Pool, settings: Settings) -> uuid.UUID:
    """An ETH account the app role opened and credited 5 through a posted deposit."""
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "dep-funded", "5", EventType.DEPOSIT)
    assert (await post_event(pool, settings, "dep-funded")).outcome is Outcome.SUCCESS
    return account


@pytest.mark.parametrize(
    "statement",
    [
        # An account with money on it.
        "INSERT INTO accounts (asset, initial_balance) VALUES ('ETH', 100)",
        "INSERT INTO accounts (asset, balance) VALUES ('ETH', 100)",
        "INSERT INTO accounts (asset, balance, initial_balance) VALUES ('ETH', 100, 100)",
        "INSERT INTO accounts (asset, held) VALUES ('ETH', 0)",
        # The balance change, the opening amount and the holds by hand.
        "UPDATE accounts SET balance = balance + 100",
        "UPDATE accounts SET initial_balance = initial_balance + 100",
        "UPDATE accounts SET held = 0",
        "UPDATE accounts SET held = held + 1",
        # A ledger row by hand (the customer leg and its counterparty).
        "INSERT INTO balance_events (account_id, amount, event_type, source_event_id,"
        " balance_after) SELECT id, 100, 'deposit', 'dep-funded~forged', balance + 100"
        " FROM accounts",
        "INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind)"
        " VALUES ('dep-funded', 'custody:external:ETH', -100, 'deposit')",
        "INSERT INTO ledger_legs (transfer_id, account_id, amount, kind)"
        " SELECT t.id, a.id, 100, 'opening' FROM ledger_transfers t, accounts a",
        "INSERT INTO ledger_transfers (kind, reference) VALUES ('opening', 'forged')",
        "INSERT INTO ledger_accounts (code, kind, chain, asset, normal_side)"
        " VALUES ('adjustments:FAKE', 'adjustments', NULL, 'ETH', 'debit')",
        "UPDATE ledger_legs SET amount = amount * 2",
        "DELETE FROM ledger_legs",
        "DELETE FROM ledger_transfers",
        "UPDATE ledger_accounts SET normal_side = 'credit'",
        "DELETE FROM balance_events",
        # An opening balance is an operator's act.
        "SELECT ledger_post_opening(id, 100) FROM accounts",
    ],
)
async def test_the_app_role_cannot_write_money_by_hand(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings, statement: str
) -> None:
    await _funded(pool, settings)
    before = await _money(owner_pool)
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
        await pool.execute(statement)
    assert await _money(owner_pool) == before
    await assert_books_balance(owner_pool)


async def test_the_outside_experiment_a_confirmed_event_with_its_row_and_balance_is_refused(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    """The experiment's second line, step by step: the event may be recorded (the service
    records provider events), but its ledger row and its balance change never by hand."""
    account = await _funded(pool, settings)
    before = await _money(owner_pool)
    async with pool.acquire() as conn:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO payment_events (event_id, account_id, amount, event_type, status)"
                " VALUES ('forged', $1, 1000, 'deposit', 'confirmed')",
                account,
            )
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(
                    "INSERT INTO balance_events (account_id, amount, event_type,"
                    " source_event_id, balance_after) VALUES ($1, 1000, 'deposit', 'forged',"
                    " 1005)",
                    account,
                )
        async with conn.transaction():
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(
                    "UPDATE accounts SET balance = balance + 1000 WHERE id = $1", account
                )
        # Nor does the full path's function post an event nobody claimed.
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO payment_events (event_id, account_id, amount, event_type)"
                " VALUES ('forged-2', $1, 1000, 'deposit')",
                account,
            )
            await conn.execute(
                "UPDATE payment_events SET status = 'processing' WHERE event_id = 'forged-2'"
            )
            with pytest.raises(INVALID, match="not being posted"):
                await conn.fetchval(
                    LEDGER_SQL["apply_balance_change"],
                    account,
                    Decimal(1000),
                    "deposit",
                    "forged-2",
                    False,
                )
    assert await _money(owner_pool) == before
    assert await balance(pool, account) == Decimal(5)


async def test_the_app_role_holds_only_what_it_needs_on_the_books(pool: asyncpg.Pool) -> None:
    privileges = await pool.fetchrow(
        "SELECT has_table_privilege($1, 'balance_events', 'INSERT') AS journal,"
        " has_table_privilege($1, 'ledger_legs', 'INSERT') AS legs,"
        " has_table_privilege($1, 'ledger_transfers', 'INSERT') AS transfers,"
        " has_table_privilege($1, 'ledger_accounts', 'INSERT') AS chart,"
        " has_column_privilege($1, 'accounts', 'balance', 'UPDATE') AS balance,"
        " has_column_privilege($1, 'accounts', 'held', 'UPDATE') AS held,"
        " has_column_privilege($1, 'accounts', 'initial_balance', 'INSERT') AS opening,"
        " has_column_privilege($1, 'accounts', 'status', 'UPDATE') AS freeze,"
        " has_column_privilege($1, 'accounts', 'asset', 'INSERT') AS open_account,"
        " has_table_privilege($1, 'balance_events', 'SELECT') AS read",
        APP_ROLE,
    )
    assert privileges is not None
    assert not any(privileges[k] for k in ("journal", "legs", "transfers", "chart"))
    assert not any(privileges[k] for k in ("balance", "held", "opening"))
    assert privileges["freeze"] and privileges["open_account"] and privileges["read"]
    definers = await pool.fetch(
        "SELECT p.proname, p.prosecdef, pg_get_userbyid(p.proowner) AS owner, p.proconfig"
        " FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname IN"
        " ('ledger_post_success', 'ledger_apply_balance_change', 'ledger_post_opening',"
        "  'ledger_place_hold', 'ledger_release_payout_hold')"
    )
    table_owner = await pool.fetchval(
        "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'accounts'::regclass"
    )
    assert len(definers) == 5
    for row in definers:
        assert row["prosecdef"], row["proname"]
        assert row["owner"] == table_owner, row["proname"]
        assert row["proconfig"] == ["search_path=public, pg_catalog, pg_temp"], row["proname"]


async def test_the_success_path_refuses_arguments_that_are_not_the_events_own(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await _funded(pool, settings)
    await new_event(pool, settings, account, "wd-1", "2", EventType.WITHDRAWAL)
    key, sources, credit_types, active_types = success_path_args("wd-1")
    call = "SELECT ledger_post_success($1, $2, $3, $4, $5, $6)"
    before = await _money(owner_pool)
    cases = [
        (("forged-key", "wd-1", sources, credit_types, active_types, 1000), "posting key"),
        ((key, "wd-1", [*sources, "failed"], credit_types, active_types, 1000), "open status"),
        # A withdrawal counted as a credit would create money.
        ((key, "wd-1", sources, [*credit_types, "withdrawal"], active_types, 1000), "credit"),
        ((key, "wd-1", sources, ["deposit"], active_types, 1000), "credit"),
        ((key, "wd-1", sources, credit_types, [], 1000), "frozen"),
        ((key, "wd-1", sources, credit_types, active_types, -1), "lock timeout"),
    ]
    for args, why in cases:
        with pytest.raises(INVALID, match=why):
            await pool.fetchval(call, *args)
    assert await _money(owner_pool) == before
    # The right arguments post it: a debit of 2.
    assert await pool.fetchval(call, key, "wd-1", sources, credit_types, active_types, 1000) == 3


async def test_the_full_path_refuses_a_posting_that_is_not_the_events_own(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await _funded(pool, settings)
    other = await new_account(pool, settings)
    await new_event(pool, settings, account, "dep-2", "1", EventType.DEPOSIT)
    await new_event(pool, settings, account, "wd-2", "1", EventType.WITHDRAWAL)
    before = await _money(owner_pool)
    cases = [
        ((account, Decimal(1), "deposit", "no-such-event", False), "does not exist"),
        ((account, Decimal(100), "deposit", "dep-2", False), "is not event"),
        ((other, Decimal(1), "deposit", "dep-2", False), "is not event"),
        ((account, Decimal(1), "withdrawal", "wd-2", False), "is not event"),  # sign flipped
        ((account, Decimal(1), "airdrop", "dep-2", False), "is not event"),
        ((account, Decimal(1), "deposit", "dep-2", False), "not being posted"),  # pending
        ((account, None, "deposit", "dep-2", False), "required"),
    ]
    async with pool.acquire() as conn:
        for args, why in cases:
            async with conn.transaction():
                with pytest.raises(INVALID, match=why):
                    await conn.fetchval(LEDGER_SQL["apply_balance_change"], *args)
    assert await _money(owner_pool) == before
    # The full path itself (post_within: claim, move, apply) still posts both, as the app role.
    async with pool.acquire() as conn, transaction(conn, settings):
        assert (await post_within(conn, "dep-2")).balance_after == Decimal(6)
        assert (await post_within(conn, "wd-2")).balance_after == Decimal(5)
    await assert_books_balance(owner_pool)


async def test_a_deposit_posts_as_the_app_role_on_both_paths(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await _funded(pool, settings)  # the one-statement path
    assert await balance(pool, account) == Decimal(5)
    await new_event(pool, settings, account, "wd-big", "50", EventType.WITHDRAWAL)
    refused = await post_event(pool, settings, "wd-big")  # the full path decides a refusal
    assert refused.outcome is Outcome.INSUFFICIENT_FUNDS
    assert await pool.fetchval(
        "SELECT outcome FROM processed_events WHERE idempotency_key = $1", posting_key("wd-big")
    ) == str(Outcome.INSUFFICIENT_FUNDS)
    assert await balance(pool, account) == Decimal(5)
    await assert_books_balance(owner_pool)


async def test_a_payout_hold_and_its_release_as_the_app_role(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await _funded(pool, settings)
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "payer", admin=False)
        with pytest.raises(INVALID, match="positive"):
            await conn.fetchrow(PAYOUT_SQL["place_hold"], account, Decimal(-1))
        assert await conn.fetchrow(PAYOUT_SQL["place_hold"], account, Decimal(6)) is None
        async with conn.transaction():
            placed = await conn.fetchrow(PAYOUT_SQL["place_hold"], account, Decimal(3))
            assert tuple(placed) == (Decimal(5), Decimal(3))
            payout = await conn.fetchrow(
                PAYOUT_SQL["insert_payout"],
                merchant,
                "key-1",
                account,
                "ETH",
                "ETH_MAINNET",
                "0x" + "ab" * 20,
                None,
                18,
                Decimal(2),
                Decimal(1),
                None,
            )
            assert payout is not None
        # The hold is kept while the payout is open (a release names a final payout).
        with pytest.raises(INVALID, match="not final"):
            await conn.fetchval(PAYOUT_SQL["release_hold"], payout["id"])
        with pytest.raises(INVALID, match="does not exist"):
            await conn.fetchval(PAYOUT_SQL["release_hold"], uuid.uuid4())
    await owner_pool.execute(
        "UPDATE payouts SET status = 'failed', failure = 'test', fee_paid = 0, nonce = 0,"
        " hot_wallet = '0x' || repeat('cd', 20),"
        " finalized_at = now() WHERE id = $1",
        payout["id"],
    )
    # Another payout's hold of 1 is open while the first is released.
    assert await pool.fetchrow(PAYOUT_SQL["place_hold"], account, Decimal(1)) is not None
    assert await pool.fetchval(PAYOUT_SQL["release_hold"], payout["id"]) == Decimal(1)
    # Released once: a second release (a replayed settle, a racing operator) frees nothing
    # that the other payout's hold still covers.
    assert await pool.fetchval(PAYOUT_SQL["release_hold"], payout["id"]) == Decimal(1)
    assert await pool.fetchval("SELECT held FROM accounts WHERE id = $1", account) == 1
    assert await pool.fetchval(
        "SELECT released FROM payout_hold_releases WHERE payout_id = $1", payout["id"]
    ) == Decimal(3)
    # The mark cannot be taken back by the service to release the hold again.
    for statement in (
        "DELETE FROM payout_hold_releases WHERE payout_id = $1",
        "UPDATE payout_hold_releases SET payout_id = gen_random_uuid() WHERE payout_id = $1",
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await pool.execute(statement, payout["id"])
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await pool.execute(
            "INSERT INTO payout_hold_releases (payout_id, account_id, released)"
            " VALUES (gen_random_uuid(), $1, 0)",
            account,
        )


async def test_the_posting_key_is_computed_inline_by_its_callers(pool: asyncpg.Pool) -> None:
    """The planner inlines the key into the expression (no SQL function call per posting),
    and the inlined key is the Python key."""
    plan = await pool.fetchval("EXPLAIN (VERBOSE, FORMAT JSON) SELECT ledger_posting_key($1)", "x")
    output = str(plan)
    assert "sha256" in output and "ledger_posting_key" not in output
    assert await pool.fetchval("SELECT ledger_posting_key($1)", "ev-1") == posting_key("ev-1")


async def test_a_payment_finalize_posts_its_credit_as_the_app_role(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, account = await _merchant_with_account(pool)
    payment = await _claimed(pool, settings, merchant)
    async with pool.acquire() as conn:
        done = await finalize_answered(
            conn,
            payment,
            ChargeResult(approved=True, reference="gw-1"),
            None,
            credit_hold_s=30.0,
            bounds=StatementBounds(lock_timeout_ms=300, statement_timeout_ms=5000),
            post_credit=True,
        )
    assert done.posted == Decimal("7.50")
    assert await balance(pool, account) == Decimal("7.50")
    legs = await owner_pool.fetchval(
        "SELECT count(*) FROM ledger_journal WHERE source_event_id = $1",
        credit_event_id(payment["id"]),
    )
    assert legs == 2
    await assert_books_balance(owner_pool)
