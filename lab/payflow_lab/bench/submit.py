"""Direct submission through the same service-layer writes the HTTP API performs.

The bench and the tests drive load through `Submitter`; `DirectSubmitter` commits the
same rows the API does (a pending payment + ONE `payment.created` outbox row; a
pending payment event + ONE `ledger.event` outbox row), so swapping in HTTP
submission is a matter of another `Submitter`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol
from uuid import UUID

import asyncpg

from payflow.broker.topology import TOPIC_LEDGER_EVENT, TOPIC_PAYMENT_CREATED
from payflow.config import Settings
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.ledger.accounts import asset_scale, record_event
from payflow.ledger.records import EventType
from payflow.money import parse_amount
from payflow.observability import new_trace_id
from payflow.outbox.writer import enqueue

PAYMENTS_SQL = load_queries("payflow.payments")


class Submitter(Protocol):
    """How load enters the system: the API in production, direct writes in the bench."""

    async def submit_payment(
        self, merchant_id: UUID, amount: str, currency: str, key: str, webhook_url: str | None
    ) -> UUID:
        """Accept a merchant payment; returns its id."""
        ...

    async def submit_deposit(self, event_id: str, account_id: UUID, amount: str) -> None:
        """Accept a provider deposit for `account_id`."""
        ...


class DirectSubmitter:
    """Commits exactly what the API commits, in one transaction per submission."""

    def __init__(self, pool: asyncpg.Pool, settings: Settings) -> None:
        self._pool = pool
        self._settings = settings

    async def submit_payment(
        self, merchant_id: UUID, amount: str, currency: str, key: str, webhook_url: str | None
    ) -> UUID:
        """Insert the pending payment and its `payment.created` outbox row together."""
        trace_id = new_trace_id()
        async with self._pool.acquire() as conn, transaction(conn, self._settings):
            value: Decimal = parse_amount(amount, await asset_scale(conn, currency))
            payment_id: UUID = await conn.fetchval(
                PAYMENTS_SQL["insert_payment"],
                merchant_id,
                value,
                currency,
                key,
                webhook_url,
                trace_id,
            )
            await enqueue(
                conn,
                TOPIC_PAYMENT_CREATED,
                {"version": 1, "payment_id": str(payment_id)},
                trace_id,
            )
        return payment_id

    async def submit_deposit(self, event_id: str, account_id: UUID, amount: str) -> None:
        """Insert the pending deposit event and its `ledger.event` outbox row together."""
        trace_id = new_trace_id()
        async with self._pool.acquire() as conn, transaction(conn, self._settings):
            asset: str = await conn.fetchval("SELECT asset FROM accounts WHERE id = $1", account_id)
            inserted = await record_event(
                conn,
                event_id=event_id,
                account_id=account_id,
                amount=amount,
                event_type=EventType.DEPOSIT,
                scale=await asset_scale(conn, asset),
                trace_id=trace_id,
            )
            if inserted:
                await enqueue(
                    conn, TOPIC_LEDGER_EVENT, {"version": 1, "event_id": event_id}, trace_id
                )
