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
    """Open an account holding `asset`; the opening balance is also its `initial_balance`."""
    await asset_scale(conn, asset)
    if initial_balance < 0:
        raise BadInput("initial balance must not be negative")
    row = await conn.fetchrow(SQL["create_account"], asset, initial_balance)
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
    inserted = await conn.fetchval(
        SQL["insert_event"], event_id, account_id, value, event_type.value, trace_id
    )
    return inserted is not None


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
