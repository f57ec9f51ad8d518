"""The delivery log and redelivery of merchant events to webhook endpoints:
`GET /api/v1/webhook-endpoints/{id}/deliveries`, `GET /api/v1/events/{id}/deliveries` and
`POST /api/v1/events/{id}/redeliver` (audited: who, when, which endpoint). Scoped like the
endpoints (`routes/webhook_endpoints.py`): another merchant's endpoint or event is 404."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path, Query, Request
from pydantic import BaseModel, BeforeValidator, Field

from payflow.api.auth import CurrentMerchant, Merchant
from payflow.api.checks import Uuid, decimal_integer_text
from payflow.api.db import connection
from payflow.api.errors import FieldError
from payflow.api.responses import JsonResponse, iso
from payflow.api.routing import api_router
from payflow.api.schemas import COMMON_PROBLEMS, Strict, problem_responses
from payflow.api.state import api_state
from payflow.db.tx import transaction
from payflow.errors import BadInput, NotFound
from payflow.webhooks.endpoints import (
    Scope,
    attempts_by_delivery,
    deliveries_of_endpoint,
    deliveries_of_event,
    redeliver,
    redeliveries_of_event,
)

router = api_router(prefix="/api/v1", tags=["webhook endpoints"])
EventId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[!-~]+$")]


class Redeliver(Strict):
    endpoint_id: Uuid | None = None


class AttemptView(BaseModel):
    attempted_at: str
    http_status: int | None = Field(description="null: no HTTP answer")
    duration_ms: int
    error: str | None


class DeliveryView(BaseModel):
    id: int
    event_id: str
    event_type: str
    endpoint_id: str
    state: Literal["pending", "delivered", "dead"]
    attempts_count: int
    last_http_status: int | None
    delivered_at: str | None
    created_at: str
    attempts: list[AttemptView] = Field(description="Oldest first")


class DeliveryPage(BaseModel):
    data: list[DeliveryView] = Field(description="Newest first")
    next_before: int | None = Field(description="`before` for the next page; null on the last")


class RedeliveryAudit(BaseModel):
    endpoint_id: str
    delivery_id: int
    requested_by: str = Field(description="api:key:<key id> or console:key:<key id>")
    requested_at: str


class EventDeliveries(BaseModel):
    data: list[DeliveryView] = Field(description="One delivery per endpoint, oldest first")
    redeliveries: list[RedeliveryAudit]


class RedeliveryQueued(BaseModel):
    endpoint_id: str
    delivery_id: int
    requested_at: str


class RedeliveryAnswer(BaseModel):
    redeliveries: list[RedeliveryQueued]
    skipped: list[str] = Field(
        description="Disabled endpoints that had a delivery of the event: not sent again"
    )


def _scope(merchant: Merchant) -> Scope:
    return Scope(merchant.id, merchant.is_admin)


def _delivery_view(row: Any, attempts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": int(row["id"]),
        "event_id": row["event_id"],
        "event_type": row["event_type"],
        "endpoint_id": str(row["endpoint_id"]),
        "state": row["state"],
        "attempts_count": int(row["attempts"]),
        "last_http_status": row["last_http_status"],
        "delivered_at": iso(row["delivered_at"]),
        "created_at": iso(row["created_at"]),
        "attempts": [{**a, "attempted_at": iso(a["attempted_at"])} for a in attempts],
    }


@router.get(
    "/webhook-endpoints/{endpoint_id}/deliveries",
    response_model=DeliveryPage,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="The endpoint's deliveries, newest first, each with its attempts",
)
async def endpoint_deliveries(
    request: Request,
    endpoint_id: Uuid,
    merchant: CurrentMerchant,
    limit: Annotated[int, BeforeValidator(decimal_integer_text), Query(ge=1, le=200)] = 50,
    before: Annotated[
        int | None,
        BeforeValidator(decimal_integer_text),
        Query(ge=1, le=2**63 - 1, description="next_before of the last page"),
    ] = None,
) -> JsonResponse:
    """`{"data": [...], "next_before": id | null}`; each attempt has its time, HTTP
    status (null: no answer), duration (ms) and error."""
    state = api_state(request)
    async with connection(state.pool) as conn:
        rows = await deliveries_of_endpoint(conn, _scope(merchant), endpoint_id, limit + 1, before)
        page = rows[:limit]
        attempts = await attempts_by_delivery(conn, [int(r["id"]) for r in page])
    more = len(rows) > limit
    return JsonResponse(
        {
            "data": [_delivery_view(r, attempts[int(r["id"])]) for r in page],
            "next_before": int(page[-1]["id"]) if more and page else None,
        }
    )


@router.get(
    "/events/{event_id}/deliveries",
    response_model=EventDeliveries,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="A merchant event's deliveries (one per endpoint) and its redeliveries",
)
async def event_deliveries(
    request: Request, event_id: EventId, merchant: CurrentMerchant
) -> JsonResponse:
    """`{"data": [...], "redeliveries": [{endpoint_id, requested_by, requested_at}]}`."""
    state = api_state(request)
    async with connection(state.pool) as conn:
        rows = await deliveries_of_event(conn, _scope(merchant), event_id)
        attempts = await attempts_by_delivery(conn, [int(r["id"]) for r in rows])
        audit = await redeliveries_of_event(conn, event_id)
    return JsonResponse(
        {
            "data": [_delivery_view(r, attempts[int(r["id"])]) for r in rows],
            "redeliveries": [
                {
                    "endpoint_id": str(a["endpoint_id"]),
                    "delivery_id": a["delivery_id"],
                    "requested_by": a["requested_by"],
                    "requested_at": iso(a["requested_at"]),
                }
                for a in audit
            ],
        }
    )


@router.post(
    "/events/{event_id}/redeliver",
    status_code=202,
    response_model=RedeliveryAnswer,
    responses=problem_responses(400, 415, 404, 409, *COMMON_PROBLEMS),
    summary="Send a merchant event again (same webhook-id), audited",
)
async def redeliver_event(
    request: Request,
    event_id: EventId,
    merchant: CurrentMerchant,
    body: Redeliver | None = None,
) -> JsonResponse:
    """To `endpoint_id` (409 when it is disabled), or to every enabled endpoint that has
    or wants the event; 202 with `{"redeliveries": [{endpoint_id, delivery_id,
    requested_at}], "skipped": [disabled endpoint ids]}`."""
    state = api_state(request)
    who = f"api:key:{merchant.key_id}"  # the merchant is the row's own column
    endpoint_id = None if body is None else body.endpoint_id
    try:
        async with connection(state.pool) as conn, transaction(conn, state.settings):
            done = await redeliver(conn, _scope(merchant), event_id, who, endpoint_id)
    except NotFound:
        raise  # a BadInput too, but answered 404
    except BadInput as error:
        raise FieldError("body.endpoint_id", str(error)) from None
    return JsonResponse(
        {
            "redeliveries": [
                {
                    "endpoint_id": str(d["endpoint_id"]),
                    "delivery_id": d["delivery_id"],
                    "requested_at": iso(d["requested_at"]),
                }
                for d in done.queued
            ],
            "skipped": [str(endpoint) for endpoint in done.skipped],
        },
        status_code=202,
    )
