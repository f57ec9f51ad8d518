"""Shared checks of the double-entry books (migration 0029) for the books tests."""

from __future__ import annotations

from decimal import Decimal

import asyncpg

from payflow.ledger.states import SQL


async def assert_books_balance(conn: asyncpg.Connection | asyncpg.Pool) -> None:
    """The trial balance is zero per asset, no posting is unbalanced, and every customer
    account's balance equals its journal."""
    lines = await conn.fetch(SQL["recon_trial_balance"])
    assert [(r["asset"], r["debits"]) for r in lines] == [
        (r["asset"], r["credits"]) for r in lines
    ], "trial balance"
    assert all(r["asset"] is not None for r in lines), "a leg names an unknown account"
    assert list(await conn.fetch(SQL["recon_unbalanced_postings"], 10)) == []
    assert list(await conn.fetch(SQL["recon_full"])) == []


async def system_balance(conn: asyncpg.Connection | asyncpg.Pool, code: str) -> Decimal:
    """A system account's balance on its normal side, summed from its legs."""
    value: Decimal = await conn.fetchval(
        "SELECT coalesce(CASE s.normal_side WHEN 'credit' THEN sum(l.amount)"
        " ELSE -sum(l.amount) END, 0)"
        " FROM ledger_accounts s LEFT JOIN ledger_legs l ON l.ledger_account = s.code"
        " WHERE s.code = $1 GROUP BY s.normal_side",
        code,
    )
    return value


async def legs_of(
    conn: asyncpg.Connection | asyncpg.Pool, event_id: str
) -> list[tuple[str, Decimal]]:
    """(account, amount) of every leg of a payment event's posting, customer leg first."""
    rows = await conn.fetch(
        "SELECT coalesce(account_id::text, ledger_account) AS account, amount FROM ledger_journal"
        " WHERE source_event_id = $1 ORDER BY ledger_account NULLS FIRST",
        event_id,
    )
    return [(r["account"], r["amount"]) for r in rows]
