"""Shared helpers for ledger tests: accounts and events in their own transactions."""

from __future__ import annotations

from decimal import Decimal
from uuid import UUID

import asyncpg

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account, record_event
from payflow.ledger.records import EventType
from payflow.money import scale_of


async def new_account(
    pool: asyncpg.Pool, settings: Settings, asset: str = "ETH", opening: str = "0"
) -> UUID:
    """An account opened by `pool`'s role; a positive `opening` is posted by the migration
    login (the service role may not post an opening balance, migration 0032)."""
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, asset)
    if Decimal(opening) > 0:
        await post_opening(settings, account.id, Decimal(opening))
    return account.id


async def post_opening(settings: Settings, account_id: UUID, amount: Decimal) -> Decimal:
    """Post `account_id`'s opening balance as the migration login, the operator's act."""
    assert settings.migration_database_url is not None
    conn = await asyncpg.connect(settings.migration_database_url)
    try:
        balance_after: Decimal = await conn.fetchval(
            "SELECT ledger_post_opening($1, $2)", account_id, amount
        )
    finally:
        await conn.close()
    return balance_after


async def new_event(
    pool: asyncpg.Pool,
    settings: Settings,
    account_id: UUID,
    event_id: str,
    amount: str,
    event_type: EventType,
    asset: str = "ETH",
) -> None:
    async with pool.acquire() as conn, transaction(conn, settings):
        await record_event(
            conn,
            event_id=event_id,
            account_id=account_id,
            amount=amount,
            event_type=event_type,
            scale=scale_of(asset),
        )


# 10^60 - 1: one more unit no longer fits the balance column, NUMERIC(78,18).
NEAR_BALANCE_MAX = "9" * 60


async def open_at_balance_max(owner_pool: asyncpg.Pool, account_id: UUID) -> None:
    """Put `account_id` at the widest balance its column holds (by its opening transfer,
    so reconciliation stays consistent): the next credit overflows."""
    await owner_pool.execute(
        "SELECT ledger_post_opening($1, $2::numeric - (SELECT balance FROM accounts"
        " WHERE id = $1))",
        account_id,
        NEAR_BALANCE_MAX,
    )


async def balance(pool: asyncpg.Pool, account_id: UUID) -> Decimal:
    value: Decimal = await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account_id)
    return value


async def count(pool: asyncpg.Pool, sql: str, *args: object) -> int:
    value: int = await pool.fetchval(sql, *args)
    return value
