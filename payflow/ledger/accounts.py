"""Accounts and payment events: creation and reads. Callers own the transaction."""

from __future__ import annotations

from decimal import Decimal
from uuid import UUID

import asyncpg

from payflow.broker.topology import TOPIC_LEDGER_EVENT
from payflow.db import Connection
from payflow.errors import BadInput, NotFound
from payflow.ledger.records import Account, AccountStatus, EventType
from payflow.ledger.states import SQL
from payflow.money import parse_amount
from payflow.outbox.writer import enqueue


def _account(row: asyncpg.Record) -> Account:
    return Account(
        id=row["id"],
        asset=row["asset"],
        balance=row["balance"],
        initial_balance=row["initial_balance"],
        status=AccountStatus(row["status"]),
    )


async def asset_scale(conn: Connection, asset: str) -> int:
    """The scale of a configured asset; `BadInput` when the asset is unknown."""
    scale: int | None = await conn.fetchval(SQL["asset_scale"], asset)
    if scale is None:
        raise BadInput(f"unknown asset {asset!r}")
    return scale


async def create_account(
    conn: Connection, asset: str, initial_balance: Decimal = Decimal(0)
) -> Account:
    """Open an account holding `asset`. A positive `initial_balance` arrives as an opening
    transfer (opening:<asset> -> the account) in the caller's transaction, never as money
    in a column; `initial_balance` keeps the amount for reading. An opening balance is an
    operator's act: the service role may open an account but not post its opening
    (migration 0032), so `conn` must then be the migration login's."""
    await asset_scale(conn, asset)
    if initial_balance < 0:
        raise BadInput("initial balance must not be negative")
    row = await conn.fetchrow(SQL["create_account"], asset)
    assert row is not None
    if initial_balance > 0:
        await conn.fetchval(SQL["post_opening"], row["id"], initial_balance)
        row = await conn.fetchrow(SQL["get_account"], row["id"])
        assert row is not None
    return _account(row)


async def get_account(conn: Connection, account_id: UUID) -> Account:
    """Read one account; `NotFound` when absent."""
    row = await conn.fetchrow(SQL["get_account"], account_id)
    if row is None:
        raise NotFound(f"account {account_id} does not exist")
    return _account(row)


async def set_account_status(conn: Connection, account_id: UUID, status: AccountStatus) -> None:
    """Freeze or unfreeze an account. A frozen account refuses debits, credits still land."""
    if await conn.fetchval(SQL["set_account_status"], account_id, status.value) is None:
        raise NotFound(f"account {account_id} does not exist")


async def record_event(
    conn: Connection,
    *,
    event_id: str,
    account_id: UUID,
    amount: str,
    event_type: EventType,
    scale: int,
    trace_id: str | None = None,
) -> bool:
    """Store a pending payment event; False when `event_id` already exists (a duplicate).

    Invariant: the stored amount is a validated positive Decimal within `scale`.
    """
    value = parse_amount(amount, scale)
    return await store_event(
        conn,
        event_id=event_id,
        account_id=account_id,
        amount=value,
        event_type=event_type,
        trace_id=trace_id,
    )


async def store_event(
    conn: Connection,
    *,
    event_id: str,
    account_id: UUID,
    amount: Decimal,
    event_type: EventType,
    trace_id: str | None = None,
) -> bool:
    """Store a pending payment event of an amount already exact (`Decimal` > 0 within the
    asset's scale, e.g. a payout's); False when `event_id` already exists (a duplicate).
    Inside the caller's transaction."""
    inserted = await conn.fetchval(
        SQL["insert_event"], event_id, account_id, amount, event_type.value, trace_id
    )
    return inserted is not None


async def get_event(conn: Connection, event_id: str) -> asyncpg.Record | None:
    """The payment event `event_id` (event_id, account_id, amount, event_type, status,
    retry_count, last_error, trace_id, created_at, updated_at), or None."""
    row: asyncpg.Record | None = await conn.fetchrow(SQL["get_event"], event_id)
    return row


async def ledger_entries(
    conn: Connection, account_id: UUID, before_id: int | None, limit: int
) -> list[asyncpg.Record]:
    """Up to `limit` ledger entries of the account (id, amount, event_type,
    source_event_id, balance_after, created_at), newest first, with ids below
    `before_id` when given (the append-only ledger pages by id)."""
    rows: list[asyncpg.Record] = await conn.fetch(
        SQL["ledger_entries"], account_id, before_id, limit
    )
    return rows


async def record_and_announce(
    conn: Connection,
    *,
    event_id: str,
    account_id: UUID,
    amount: str,
    event_type: EventType,
    scale: int,
    trace_id: str,
) -> bool:
    """Store a pending payment event and, only when it is new, its `ledger.event` outbox row.

    Invariant: one outbox row per event id, ever; a duplicate writes nothing.
    """
    inserted = await record_event(
        conn,
        event_id=event_id,
        account_id=account_id,
        amount=amount,
        event_type=event_type,
        scale=scale,
        trace_id=trace_id,
    )
    if inserted:
        await enqueue(conn, TOPIC_LEDGER_EVENT, {"version": 1, "event_id": event_id}, trace_id)
    return inserted
