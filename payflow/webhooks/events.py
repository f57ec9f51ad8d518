"""The merchant's event stream: every money event of a merchant, recorded once, in the
transaction that causes it (table `merchant_events`, migration 0035).

An event is `{"type", "timestamp", "data"}` on every wire (Standard Webhooks), its id the
`webhook-id` of every delivery of it. `data` carries amounts as strings at the asset's
scale (`money.format_at_scale`), never numbers.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

import orjson

from payflow.db import Connection
from payflow.db.queries import load_queries

SQL = load_queries("payflow.webhooks")


class EventKind(StrEnum):
    """The types of a merchant's events (`merchant_events.type`)."""

    PAYMENT_SUCCEEDED = "payment.succeeded"
    PAYMENT_FAILED = "payment.failed"
    DEPOSIT_PENDING = "deposit.pending"
    DEPOSIT_CREDITED = "deposit.credited"
    DEPOSIT_REVERSED = "deposit.reversed"
    PAYOUT_HELD = "payout.held"
    PAYOUT_SENT = "payout.sent"
    PAYOUT_CONFIRMED = "payout.confirmed"
    PAYOUT_FAILED = "payout.failed"


def new_event_id() -> str:
    """`evt_` + 32 random hex digits (the `webhook-id` of every delivery of the event)."""
    return "evt_" + secrets.token_hex(16)


async def record_event(
    conn: Connection,
    merchant_id: UUID,
    kind: EventKind,
    subject_id: str,
    data: Mapping[str, Any],
) -> str | None:
    """Record `kind` about `subject_id` for `merchant_id` in the CALLER's transaction.

    `data`: the event's `data` object, JSON-ready (amounts already strings). Returns the new
    event's id, or None when this cause was recorded already (UNIQUE (type, subject): a
    retried or replayed transaction records nothing twice).
    Invariant: the event commits or rolls back with the change that caused it, and so do
    its deliveries: the one SQL function `merchant_event_record` (migration 0037) also
    makes one delivery per enabled endpoint of the merchant that wants `kind`, and their
    `endpoint.deliver` outbox rows, sent by the relay after the commit.
    """
    event_id: str | None = await conn.fetchval(
        SQL["record_merchant_event"], merchant_id, kind.value, subject_id, dict(data)
    )
    return event_id


def event_body(kind: str, created_at: datetime, data: Mapping[str, Any]) -> bytes:
    """The Standard Webhooks payload `{"type", "timestamp", "data"}` of an event, as bytes
    (the timestamp RFC 3339 in UTC, to the microsecond)."""
    return orjson.dumps(
        {"type": kind, "timestamp": created_at.isoformat(), "data": dict(data)},
    )
