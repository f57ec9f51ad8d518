"""A payment as the worker reads it: the payment with its merchant's webhook secret and
its currency's scale."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.errors import NotFound

SQL = load_queries("payflow.payments")


async def load_payment(conn: Connection, payment_id: UUID) -> asyncpg.Record:
    """The payment with its merchant's webhook secret; `NotFound` when absent."""
    row = await conn.fetchrow(SQL["payment_for_processing"], payment_id)
    if row is None:
        raise NotFound(f"payment {payment_id} does not exist")
    return row
