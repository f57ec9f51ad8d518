"""The caller's event stream (`GET /api/v1/events`, keyset-paged) and `GET
/api/v1/events/{id}`: a stream event (`evt_…`), a payment event and its posting outcome,
or a provider's deposit report."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path, Query, Request
from pydantic import AwareDatetime, BeforeValidator

from payflow.api.auth import SQL, CurrentMerchant
from payflow.api.checks import decimal_integer_text, rfc3339_text, utc_bound
from payflow.api.cursors import NOT_A_CURSOR, decode_cursor, encode_cursor, listing_digest
from payflow.api.db import connection
from payflow.api.errors import FieldError
from payflow.api.responses import JsonResponse, iso, wire_amount
from payflow.api.routing import api_router
from payflow.api.schemas import (
    COMMON_PROBLEMS,
    DepositReportView,
    EventView,
    MerchantEventPage,
    MerchantEventView,
    problem_responses,
)
from payflow.api.state import api_state
from payflow.errors import NotFound
from payflow.ledger.posting import posting_key
from payflow.webhooks import EventKind, get_event, list_events
from payflow.webhooks.events import EVENT_ID_PATTERN

router = api_router(prefix="/api/v1", tags=["accounts"])
EventId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[!-~]+$")]
STREAM_ID = re.compile(EVENT_ID_PATTERN)
KNOWN_TYPES = ", ".join(kind.value for kind in EventKind)


def parse_types(values: list[str] | None) -> list[EventKind] | None:
    """The `type` filter: repeated and/or comma-separated event types, each one of
    `EventKind`; None for no filter. `FieldError` (422) naming an unknown type."""
    if not values:
        return None
    kinds: list[EventKind] = []
    if len(values) > 20 or sum(len(value) for value in values) > 400:
        raise FieldError("query.type", "names too many event types")
    for value in values:
        for part in value.split(","):
            name = part.strip()
            try:
                kind = EventKind(name)
            except ValueError:
                raise FieldError(
                    "query.type", f"{name[:60]!r} is not an event type (one of {KNOWN_TYPES})"
                ) from None
            if kind not in kinds:
                kinds.append(kind)
    return kinds


def parse_event_cursor(cursor: str, listing: str) -> tuple[datetime, str]:
    """The keyset position a `next_cursor` names; `FieldError` (422) for anything else,
    or for a cursor made for another order or other filters (`listing`)."""
    moment, event_id = decode_cursor(cursor, listing, id_kind=str)
    if not STREAM_ID.match(event_id):
        raise FieldError("query.cursor", NOT_A_CURSOR)
    return moment, event_id


@router.get(
    "/events",
    response_model=MerchantEventPage,
    responses=problem_responses(*COMMON_PROBLEMS),
    summary="List the caller's events (payments, deposits, payouts), with cursor pagination",
)
async def list_stream(
    request: Request,
    merchant: CurrentMerchant,
    types: Annotated[
        list[str] | None,
        Query(alias="type", description="event types; repeat it or separate them by commas"),
    ] = None,
    created_from: Annotated[
        AwareDatetime | None, BeforeValidator(rfc3339_text), Query(description="inclusive")
    ] = None,
    created_to: Annotated[
        AwareDatetime | None, BeforeValidator(rfc3339_text), Query(description="exclusive")
    ] = None,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, BeforeValidator(decimal_integer_text), Query(ge=1, le=100)] = 20,
    order: Annotated[Literal["asc", "desc"], Query()] = "desc",
) -> JsonResponse:
    """The caller's own events, newest first by default (`order=asc`: oldest first), in
    (created_at, id) order; `next_cursor` (with the same filters and order) continues
    after the page's last event, null on the last page."""
    state = api_state(request)
    kinds = parse_types(types)
    try:
        lower, upper = utc_bound(created_from), utc_bound(created_to)
    except ValueError as error:
        raise FieldError("query.created_from/created_to", str(error)) from None
    listing = listing_digest(
        "events",
        types=[kind.value for kind in kinds or []],
        created_from=lower,
        created_to=upper,
        order=order,
    )
    after = parse_event_cursor(cursor, listing) if cursor else None
    async with connection(state.pool) as conn:
        events = await list_events(
            conn,
            merchant.id,
            kinds=kinds,
            created_from=lower,
            created_to=upper,
            after=after,
            descending=order == "desc",
            limit=limit + 1,
        )
    page = events[:limit]
    has_more = len(events) > limit
    next_cursor = encode_cursor(page[-1].created_at, page[-1].id, listing) if has_more else None
    return JsonResponse(
        {"data": [event.body() for event in page], "has_more": has_more, "next_cursor": next_cursor}
    )


@router.get(
    "/events/{event_id}",
    response_model=MerchantEventView | EventView | DepositReportView,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="Read an event of the caller's stream (evt_…), a payment event and its posting"
    " outcome (e.g. insufficient_funds), or a provider's deposit report",
)
async def read_event(
    request: Request, event_id: EventId, merchant: CurrentMerchant
) -> JsonResponse:
    """An event of the stream (`evt_…`: `MerchantEventView`, as the list shows it), a
    ledger event with its posting outcome, or a provider's deposit report (by the id the
    provider webhook answered: `DepositReportView`). Events and reports of other
    merchants answer 404, like unknown ids."""
    state = api_state(request)
    if STREAM_ID.match(event_id):
        async with connection(state.pool) as conn:
            event = await get_event(conn, event_id, merchant.id, is_admin=merchant.is_admin)
        if event is None:
            raise NotFound(f"event {event_id} does not exist")
        return JsonResponse(event.body())
    async with connection(state.pool) as conn:
        row = await conn.fetchrow(
            SQL["get_event_scoped"], event_id, merchant.id, merchant.is_admin, posting_key(event_id)
        )
        report = None
        if row is None:
            report = await conn.fetchrow(
                SQL["get_deposit_report_scoped"], event_id, merchant.id, merchant.is_admin
            )
    if report is not None:
        return JsonResponse(_report_view(report))
    if row is None:
        raise NotFound(f"event {event_id} does not exist")
    return JsonResponse(
        {
            "event_id": row["event_id"],
            "account_id": str(row["account_id"]),
            "event_type": row["event_type"],
            "amount": wire_amount(row["amount"], row["asset"]),
            "asset": row["asset"],
            "status": row["status"],
            "outcome": row["outcome"],
            "last_error": row["last_error"],
            "trace_id": row["trace_id"],
            "created_at": iso(row["created_at"]),
            "updated_at": iso(row["updated_at"]),
        }
    )


def _report_view(row: Any) -> dict[str, Any]:
    """The wire form of a `get_deposit_report_scoped` row (`DepositReportView`)."""
    return {
        "event_id": row["provider_event_id"],
        "event_type": "deposit_report",
        "account_id": str(row["account_id"]),
        "amount": wire_amount(row["amount"], row["asset"]),
        "asset": row["asset"],
        "status": row["status"],
        "reason": row["reason"],
        "transfer_id": row["transfer_id"],
        "deposit_status": row["deposit_status"],
        "credit_event_id": row["credit_event_id"],
        "trace_id": row["trace_id"],
        "created_at": iso(row["created_at"]),
        "decided_at": iso(row["decided_at"]) if row["decided_at"] is not None else None,
    }
