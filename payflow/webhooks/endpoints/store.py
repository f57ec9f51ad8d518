"""A merchant's webhook endpoints (`webhook_endpoints`): create, read, change, delete,
rotate the secret; the delivery log of an endpoint or of an event; redelivery, audited.

Every function runs in the CALLER's transaction (or autocommits one statement) and is
scoped: `merchant_id` sees its own endpoints only, `admin` every merchant's; another
merchant's endpoint is indistinguishable from an unknown one (`NotFound`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.errors import BadInput, Conflict, NotFound
from payflow.text import unsafe_text_reason
from payflow.webhooks.endpoints.dead import requeue_delivery
from payflow.webhooks.events import EventKind

SQL = load_queries("payflow.webhooks.endpoints")

ALL_EVENTS = "*"
MAX_EVENTS = 20  # webhook_endpoints_events_valid
# Endpoints a merchant may hold (deleted ones do not count). Every event of the merchant
# is fanned out to each endpoint inside the transaction that records it (a payment's
# finalize, a deposit's credit), and each delivery is a POST payflow makes: without a
# cap one key could make every money event write thousands of rows and payflow POST
# thousands of times to any public host.
MAX_ENDPOINTS = 20


@dataclass(frozen=True, slots=True)
class Scope:
    """Who asks: a merchant (its own endpoints) or an admin (every merchant's)."""

    merchant_id: UUID
    admin: bool = False


MAX_DESCRIPTION = 500  # webhook_endpoints_description_length


def checked_description(description: str) -> str:
    """`description` as given, or `BadInput` when over `MAX_DESCRIPTION` characters (never
    cut short: what is stored is what the merchant wrote) or holding what free text may
    not (`payflow.text`: control characters, bidi overrides and isolates)."""
    if len(description) > MAX_DESCRIPTION:
        raise BadInput(f"a description is at most {MAX_DESCRIPTION} characters")
    reason = unsafe_text_reason(description, multiline=True)
    if reason is not None:
        raise BadInput(f"a description {reason}")
    return description


def valid_events(events: Sequence[str]) -> list[str]:
    """`events` checked and normalised: `["*"]` alone, or 1 to 20 distinct known event
    types (`EventKind`), in the order given. Raises `BadInput` naming the first bad one."""
    if not events:
        raise BadInput('enabled_events must name at least one event type, or be ["*"]')
    if ALL_EVENTS in events:
        if len(events) != 1:
            raise BadInput('"*" stands for every event type and must be alone')
        return [ALL_EVENTS]
    known = {kind.value for kind in EventKind}
    out: list[str] = []
    for name in events:
        if name not in known:
            raise BadInput(f"unknown event type {name!r}; known: {', '.join(sorted(known))}")
        if name not in out:
            out.append(name)
    if len(out) > MAX_EVENTS:
        raise BadInput(f"at most {MAX_EVENTS} event types")
    return out


async def create_endpoint(
    conn: Connection,
    merchant_id: UUID,
    *,
    url: str,
    events: Sequence[str],
    secret: str,
    description: str = "",
    enabled: bool = True,
) -> asyncpg.Record:
    """Insert an endpoint of `merchant_id` (url already checked by the SSRF rules, `secret`
    a fresh `whsec_…`); returns its row. `events` and `description` are checked here too
    (`valid_events`, `checked_description`: `BadInput`, whoever the caller). `Conflict`
    when the merchant holds `MAX_ENDPOINTS` endpoints already; inside the caller's
    transaction two creations at once cannot both pass the cap (a lock per merchant)."""
    events = valid_events(events)
    description = checked_description(description)
    await conn.execute(SQL["lock_merchant_endpoints"], merchant_id)
    if await conn.fetchval(SQL["count_endpoints"], merchant_id) >= MAX_ENDPOINTS:
        raise Conflict(
            f"a merchant has at most {MAX_ENDPOINTS} webhook endpoints: delete one first"
        )
    row = await conn.fetchrow(
        SQL["insert_endpoint"], merchant_id, url, description, list(events), enabled, secret
    )
    assert row is not None
    return row


async def get_endpoint(conn: Connection, scope: Scope, endpoint_id: UUID) -> asyncpg.Record:
    """The endpoint's row; `NotFound` when unknown, deleted or another merchant's."""
    row = await conn.fetchrow(SQL["get_endpoint"], endpoint_id, scope.merchant_id, scope.admin)
    if row is None:
        raise NotFound(f"webhook endpoint {endpoint_id} does not exist")
    return row


async def endpoint_position(conn: Connection, scope: Scope, endpoint_id: UUID) -> asyncpg.Record:
    """Where a list page that ended at `endpoint_id` continues from: its (created_at, id),
    also once deleted (a page's last endpoint deleted meanwhile must not end the paging);
    `NotFound` for an id never in scope."""
    row = await conn.fetchrow(SQL["endpoint_position"], endpoint_id, scope.merchant_id, scope.admin)
    if row is None:
        raise NotFound(f"webhook endpoint {endpoint_id} does not exist")
    return row


async def list_endpoints(
    conn: Connection, scope: Scope, limit: int, after: asyncpg.Record | None = None
) -> list[asyncpg.Record]:
    """Up to `limit` endpoints in creation order, after `after` (an `endpoint_position`
    or an endpoint row)."""
    return list(
        await conn.fetch(
            SQL["list_endpoints"],
            scope.merchant_id,
            scope.admin,
            limit,
            None if after is None else after["created_at"],
            None if after is None else after["id"],
        )
    )


async def update_endpoint(
    conn: Connection,
    scope: Scope,
    endpoint_id: UUID,
    *,
    url: str | None = None,
    description: str | None = None,
    events: Sequence[str] | None = None,
    enabled: bool | None = None,
) -> asyncpg.Record:
    """Change the given fields (None: unchanged); enabling clears the failure streak and
    the disabled notice. `events` and `description` are checked as by `create_endpoint`
    (`BadInput`). Returns the row; `NotFound` as `get_endpoint`."""
    if events is not None:
        events = valid_events(events)
    if description is not None:
        description = checked_description(description)
    row = await conn.fetchrow(
        SQL["update_endpoint"],
        endpoint_id,
        scope.merchant_id,
        scope.admin,
        url,
        description,
        None if events is None else list(events),
        enabled,
    )
    if row is None:
        raise NotFound(f"webhook endpoint {endpoint_id} does not exist")
    return row


async def delete_endpoint(conn: Connection, scope: Scope, endpoint_id: UUID) -> int:
    """Delete (softly: disabled, hidden; its deliveries keep naming it); `NotFound`. Its
    pending deliveries end dead in the same transaction (nothing would ever send them);
    returns how many. A redelivery to it holds the row FOR SHARE, so a delete waits
    for it and then cancels what it queued."""
    if not await conn.fetchval(SQL["delete_endpoint"], endpoint_id, scope.merchant_id, scope.admin):
        raise NotFound(f"webhook endpoint {endpoint_id} does not exist")
    return len(await conn.fetch(SQL["cancel_endpoint_deliveries"], endpoint_id))


async def rotate_secret(
    conn: Connection, scope: Scope, endpoint_id: UUID, secret: str, overlap_s: float
) -> asyncpg.Record:
    """Make `secret` the endpoint's secret; the old one keeps signing too for `overlap_s`
    seconds (every delivery then carries both signatures). Returns the row; `NotFound`.

    Inside the caller's transaction the endpoint row is locked first (FOR UPDATE), so
    concurrent rotations of one endpoint are serialised: each one's `previous_secret` is
    the secret the rotation before it answered, and after N rotations the newest secret
    signs, with the one before it during the overlap (older ones no longer sign)."""
    if (
        await conn.fetchrow(
            SQL["lock_endpoint_for_rotation"], endpoint_id, scope.merchant_id, scope.admin
        )
        is None
    ):
        raise NotFound(f"webhook endpoint {endpoint_id} does not exist")
    row = await conn.fetchrow(
        SQL["rotate_endpoint_secret"],
        endpoint_id,
        scope.merchant_id,
        scope.admin,
        secret,
        overlap_s,
    )
    if row is None:
        raise NotFound(f"webhook endpoint {endpoint_id} does not exist")
    return row


async def attempts_by_delivery(
    conn: Connection, delivery_ids: Sequence[int]
) -> dict[int, list[dict[str, Any]]]:
    """{delivery id: its attempts, oldest first, each {attempted_at, http_status,
    duration_ms, error}}."""
    out: dict[int, list[dict[str, Any]]] = {int(i): [] for i in delivery_ids}
    for row in await conn.fetch(SQL["attempts_of_deliveries"], list(delivery_ids)):
        out[int(row["delivery_id"])].append(
            {
                "attempted_at": row["attempted_at"],
                "http_status": row["http_status"],
                "duration_ms": row["duration_ms"],
                "error": row["error"],
            }
        )
    return out


async def deliveries_of_endpoint(
    conn: Connection, scope: Scope, endpoint_id: UUID, limit: int, before: int | None
) -> list[asyncpg.Record]:
    """Up to `limit` deliveries to the endpoint, newest first, below delivery id `before`;
    `NotFound` for an endpoint out of scope."""
    await get_endpoint(conn, scope, endpoint_id)
    return list(await conn.fetch(SQL["deliveries_of_endpoint"], endpoint_id, limit, before))


async def event_in_scope(conn: Connection, scope: Scope, event_id: str) -> asyncpg.Record:
    """The merchant event's row (`id`, `merchant_id`, `type`, …); `NotFound` out of scope."""
    row = await conn.fetchrow(SQL["event_scoped"], event_id, scope.merchant_id, scope.admin)
    if row is None:
        raise NotFound(f"event {event_id} does not exist")
    return row


async def deliveries_of_event(
    conn: Connection, scope: Scope, event_id: str
) -> list[asyncpg.Record]:
    """Every delivery of the event (one per endpoint), oldest first; `NotFound`."""
    await event_in_scope(conn, scope, event_id)
    return list(await conn.fetch(SQL["deliveries_of_event"], event_id))


async def redeliveries_of_event(conn: Connection, event_id: str) -> list[asyncpg.Record]:
    """The redelivery audit of an event: who asked, when, for which endpoint."""
    return list(await conn.fetch(SQL["redeliveries_of_event"], event_id))


@dataclass(frozen=True, slots=True)
class Redelivered:
    """What a redelivery did: `queued` [{endpoint_id, delivery_id, requested_at}] and the
    disabled endpoints it `skipped` (they had a delivery of the event)."""

    queued: list[dict[str, Any]]
    skipped: list[UUID]


async def redeliver(
    conn: Connection,
    scope: Scope,
    event_id: str,
    requested_by: str,
    endpoint_id: UUID | None = None,
) -> Redelivered:
    """Inside the caller's transaction: send the event again, under the same `webhook-id`,
    to `endpoint_id` (any enabled endpoint of the event's merchant, even one that did not
    want it then) or, with None, to every enabled endpoint that has a delivery of it or
    wants it now (disabled ones are skipped and named); each delivery pending again with
    its outbox row, each audited in `webhook_redeliveries` with `requested_by`. The
    endpoints are locked FOR SHARE until the commit, so none is deleted meanwhile.
    `NotFound` for an event or endpoint out of scope (or deleted); `Conflict` when
    `endpoint_id` is disabled (it would wait until enabled again); `BadInput` when no
    enabled endpoint would receive it."""
    event = await event_in_scope(conn, scope, event_id)
    merchant_id: UUID = event["merchant_id"]
    rows = await conn.fetch(SQL["redeliverable_endpoints"], event_id, merchant_id, endpoint_id)
    if endpoint_id is not None and not rows:
        raise NotFound(f"webhook endpoint {endpoint_id} does not exist")
    if endpoint_id is not None and not rows[0]["enabled"]:
        raise Conflict(
            f"webhook endpoint {endpoint_id} is disabled: enable it first, then redeliver"
        )
    skipped = [row["id"] for row in rows if not row["enabled"]]
    rows = [row for row in rows if row["enabled"]]
    if not rows:
        raise BadInput("no enabled webhook endpoint receives this event")
    out: list[dict[str, Any]] = []
    for row in rows:
        delivery_id = int(
            await conn.fetchval(SQL["ensure_delivery"], event_id, row["id"], merchant_id)
        )
        await requeue_delivery(conn, delivery_id)
        audit = await conn.fetchrow(
            SQL["insert_redelivery"], event_id, row["id"], delivery_id, merchant_id, requested_by
        )
        assert audit is not None
        out.append(
            {
                "endpoint_id": row["id"],
                "delivery_id": delivery_id,
                "requested_at": audit["requested_at"],
            }
        )
    return Redelivered(out, skipped)
