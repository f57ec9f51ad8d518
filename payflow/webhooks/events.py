"""The merchant's event stream: every money event of a merchant, recorded once, in the
transaction that causes it (table `merchant_events`, migration 0035), always through the
one SQL function `merchant_event_record` (migration 0037): `payment_finalize` calls it for
payments, `record_event` for everything else. Read by the events API (`list_events`,
`get_event`: keyset pages over (created_at, id) per merchant).

An event is `{"type", "timestamp", "data"}` on every wire (Standard Webhooks), its id the
`webhook-id` of every delivery of it. `data` carries amounts as strings at the asset's
scale (`money.format_at_scale`), never numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
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


EVENT_ID_PATTERN = r"^evt_[0-9a-f]{32}$"  # merchant_events' id CHECK
SUBJECT_MAX_LENGTH = 200  # merchant_events' subject_id CHECK


@dataclass(frozen=True, slots=True)
class MerchantEvent:
    """One row of a merchant's stream: `id` (`evt_…`), `type` (an `EventKind` value),
    `created_at` (aware, the recording transaction's time) and `data` (JSON-ready)."""

    id: str
    type: str
    created_at: datetime
    data: Mapping[str, Any]

    def body(self) -> dict[str, Any]:
        """The Standard Webhooks payload of this event, with its id first:
        `{"id", "type", "timestamp", "data"}` (what the events API lists)."""
        return {"id": self.id, **event_payload(self.type, self.created_at, self.data)}


def rfc3339(moment: datetime) -> str:
    """`moment` in UTC, RFC 3339 to the microsecond, with a `Z` suffix."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def record_event(
    conn: Connection,
    merchant_id: UUID,
    kind: EventKind,
    subject_id: str,
    data: Mapping[str, Any],
) -> str | None:
    """Record `kind` about `subject_id` for `merchant_id` in the CALLER's transaction,
    through the database's one recording function (`merchant_event_record`).

    `data`: the event's `data` object, JSON-ready (amounts already strings at the asset's
    scale, never numbers). `subject_id`: 1..200 characters naming the cause. Returns the
    new event's id (`evt_` + 32 hex digits), or None when this cause was recorded already
    (UNIQUE (type, subject): a retried or replayed transaction records nothing twice).
    Invariant: the event commits or rolls back with the change that caused it.
    """
    event_id: str | None = await conn.fetchval(
        SQL["record_merchant_event"], merchant_id, kind.value, subject_id, dict(data)
    )
    return event_id


def event_payload(kind: str, created_at: datetime, data: Mapping[str, Any]) -> dict[str, Any]:
    """The Standard Webhooks payload `{"type", "timestamp", "data"}` of an event (the
    timestamp RFC 3339 in UTC with `Z`, to the microsecond)."""
    return {"type": kind, "timestamp": rfc3339(created_at), "data": dict(data)}


def event_body(kind: str, created_at: datetime, data: Mapping[str, Any]) -> bytes:
    """`event_payload` as the bytes a webhook POST carries."""
    return orjson.dumps(event_payload(kind, created_at, data))


def _event(row: Any) -> MerchantEvent:
    return MerchantEvent(row["id"], row["type"], row["created_at"], row["data"])


async def list_events(
    conn: Connection,
    merchant_id: UUID,
    *,
    kinds: Sequence[EventKind] | None,
    created_from: datetime | None,
    created_to: datetime | None,
    after: tuple[datetime, str] | None,
    descending: bool,
    limit: int,
) -> list[MerchantEvent]:
    """Up to `limit` of the merchant's events in (created_at, id) order (newest first when
    `descending`), of `kinds` (None: every type), created in [created_from, created_to)
    (None: unbounded), strictly after the keyset position `after` (the last event of the
    previous page, in the same order; None: from the start). A keyset scan of the
    merchant's index: the cost is the page's, however deep the page."""
    rows = await conn.fetch(
        SQL["list_merchant_events_desc"] if descending else SQL["list_merchant_events_asc"],
        merchant_id,
        [kind.value for kind in kinds] if kinds else None,
        created_from,
        created_to,
        after[0] if after else None,
        after[1] if after else None,
        limit,
    )
    return [_event(row) for row in rows]


async def get_event(
    conn: Connection, event_id: str, merchant_id: UUID, *, is_admin: bool
) -> MerchantEvent | None:
    """The event `event_id` if it is the merchant's (any merchant's for an admin), else
    None: another merchant's event is indistinguishable from a missing one."""
    row = await conn.fetchrow(SQL["get_merchant_event"], event_id, merchant_id, is_admin)
    return None if row is None else _event(row)
