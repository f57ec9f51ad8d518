"""`/api/v1/webhook-endpoints`: a merchant's webhook endpoints (CRUD and secret
rotation; their delivery log and redelivery are `routes/webhook_deliveries.py`).

An endpoint's secret is answered only by the create and the rotate responses. Another
merchant's endpoint or event answers 404, like an unknown id; an admin key reaches all.
Creating moves no money: `Idempotency-Key` is optional; with one, a retry with the same
body replays the stored answer (the same endpoint and secret), another body is 409.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Header, Path, Query, Request, Response
from pydantic import BaseModel, BeforeValidator, Field, field_validator

from payflow.api.auth import CurrentMerchant, Merchant, new_webhook_secret
from payflow.api.checks import Uuid, clean_text, decimal_integer_text
from payflow.api.db import connection
from payflow.api.errors import FieldError
from payflow.api.headers import idempotency_key_once, strip_ows
from payflow.api.responses import JsonResponse, iso
from payflow.api.routing import api_router
from payflow.api.schemas import COMMON_PROBLEMS, JsonBool, Strict, problem_responses
from payflow.api.state import api_state
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.errors import BadInput
from payflow.idempotency.records import (
    KEY_PATTERN,
    StoredResponse,
    is_key_race,
    lookup,
    request_hash,
    store,
)
from payflow.webhooks.endpoints import (
    MAX_DESCRIPTION,
    Scope,
    checked_description,
    create_endpoint,
    delete_endpoint,
    endpoint_position,
    get_endpoint,
    list_endpoints,
    rotate_secret,
    update_endpoint,
    valid_events,
)
from payflow.webhooks.ssrf import check_webhook_url

router = api_router(prefix="/api/v1", tags=["webhook endpoints"])
CREATE_SCOPE = "webhook_endpoints.create"
EventId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[!-~]+$")]
OptionalKey = Annotated[
    str | None,
    BeforeValidator(strip_ows),
    Header(alias="Idempotency-Key", pattern=KEY_PATTERN, description="Optional"),
]


def _checked_description(value: str) -> str:
    """`checked_description` (the domain's rule) as a field validator's `ValueError`."""
    try:
        return checked_description(clean_text(value))
    except BadInput as error:
        raise ValueError(str(error)) from None


class EndpointCreate(Strict):
    url: str = Field(max_length=2048, description="https URL of the merchant's receiver")
    enabled_events: list[str] = Field(
        default_factory=lambda: ["*"], max_length=20, description='Event types, or ["*"]'
    )
    description: str = Field(default="", max_length=MAX_DESCRIPTION)
    enabled: JsonBool = True

    @field_validator("url")
    @classmethod
    def _text(cls, value: str) -> str:
        return clean_text(value)

    @field_validator("description")
    @classmethod
    def _description(cls, value: str) -> str:
        return _checked_description(value)


class EndpointPatch(Strict):
    url: str | None = Field(default=None, max_length=2048)
    enabled_events: list[str] | None = Field(default=None, max_length=20)
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION)
    enabled: JsonBool | None = None

    @field_validator("url")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return None if value is None else clean_text(value)

    @field_validator("description")
    @classmethod
    def _description(cls, value: str | None) -> str | None:
        return None if value is None else _checked_description(value)


class EndpointView(BaseModel):
    id: str
    url: str
    description: str
    enabled_events: list[str]
    enabled: bool
    disabled_reason: str | None = Field(description="merchant, or failing (auto-disabled)")
    disabled_at: str | None
    failing_since: str | None
    secret_rotation_overlap_until: str | None
    created_at: str
    updated_at: str
    secret: str | None = Field(default=None, description="Only in create and rotate answers")


class EndpointPage(BaseModel):
    data: list[EndpointView] = Field(description="Oldest first; never a secret")
    next_after: str | None = Field(description="`after` for the next page; null on the last")


def endpoint_view(row: Any, *, secret: bool = False) -> dict[str, Any]:
    """The wire form of a `webhook_endpoints` row; the secret only when `secret`."""
    view = {
        "id": str(row["id"]),
        "url": row["url"],
        "description": row["description"],
        "enabled_events": list(row["enabled_events"]),
        "enabled": row["enabled"],
        "disabled_reason": row["disabled_reason"],
        "disabled_at": iso(row["disabled_at"]),
        "failing_since": iso(row["failing_since"]),
        "secret_rotation_overlap_until": iso(row["previous_secret_until"]),
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
    }
    if secret:
        view["secret"] = row["secret"]
    return view


def _scope(merchant: Merchant) -> Scope:
    return Scope(merchant.id, merchant.is_admin)


def _checked_url(settings: Settings, url: str) -> str:
    """The URL as today's SSRF rules accept it, or a 422 naming `body.url`."""
    try:
        check_webhook_url(url, settings.webhook_allow_hosts, settings.webhook_nat64_prefixes)
    except BadInput as error:
        raise FieldError("body.url", str(error)) from None
    return url


def _checked_events(events: list[str]) -> list[str]:
    try:
        return valid_events(events)
    except BadInput as error:
        raise FieldError("body.enabled_events", str(error)) from None


@router.post(
    "/webhook-endpoints",
    status_code=201,
    response_model=EndpointView,
    responses=problem_responses(400, 415, 409, *COMMON_PROBLEMS),
    summary="Create a webhook endpoint (its secret is shown once, here)",
    dependencies=[Depends(idempotency_key_once)],
)
async def create(
    request: Request, body: EndpointCreate, merchant: CurrentMerchant, key: OptionalKey = None
) -> JsonResponse:
    """A new endpoint of the caller, with a fresh `whsec_` secret."""
    state = api_state(request)
    url = _checked_url(state.settings, body.url)
    events = _checked_events(body.enabled_events)
    req_hash = request_hash(CREATE_SCOPE, body.model_dump())
    for attempt in (1, 2):
        try:
            async with connection(state.pool) as conn, transaction(conn, state.settings):
                if key is not None:
                    stored = await lookup(conn, merchant.id, CREATE_SCOPE, key, req_hash)
                    if stored is not None:
                        return JsonResponse(stored.body, status_code=stored.status)
                row = await create_endpoint(
                    conn,
                    merchant.id,
                    url=url,
                    events=events,
                    secret=new_webhook_secret(),
                    description=body.description,
                    enabled=body.enabled,
                )
                answer = StoredResponse(201, endpoint_view(row, secret=True))
                if key is not None:
                    await store(conn, merchant.id, CREATE_SCOPE, key, req_hash, answer)
            return JsonResponse(answer.body, status_code=answer.status)
        except Exception as exc:
            if attempt == 1 and is_key_race(exc):
                continue
            raise
    raise AssertionError("unreachable")  # pragma: no cover


@router.get(
    "/webhook-endpoints",
    response_model=EndpointPage,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="List webhook endpoints (oldest first)",
)
async def list_(
    request: Request,
    merchant: CurrentMerchant,
    limit: Annotated[int, BeforeValidator(decimal_integer_text), Query(ge=1, le=200)] = 100,
    after: Annotated[Uuid | None, Query(description="the last id of the previous page")] = None,
) -> JsonResponse:
    """`{"data": [...], "next_after": id | null}`."""
    state = api_state(request)
    scope = _scope(merchant)
    async with connection(state.pool) as conn:
        last = None if after is None else await endpoint_position(conn, scope, after)
        rows = await list_endpoints(conn, scope, limit + 1, last)
    page = rows[:limit]
    more = len(rows) > limit
    return JsonResponse(
        {
            "data": [endpoint_view(r) for r in page],
            "next_after": str(page[-1]["id"]) if more and page else None,
        }
    )


@router.get(
    "/webhook-endpoints/{endpoint_id}",
    response_model=EndpointView,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="Read a webhook endpoint",
)
async def read(request: Request, endpoint_id: Uuid, merchant: CurrentMerchant) -> JsonResponse:
    """Another merchant's endpoint is 404."""
    state = api_state(request)
    async with connection(state.pool) as conn:
        row = await get_endpoint(conn, _scope(merchant), endpoint_id)
    return JsonResponse(endpoint_view(row))


@router.patch(
    "/webhook-endpoints/{endpoint_id}",
    response_model=EndpointView,
    responses=problem_responses(400, 415, 404, *COMMON_PROBLEMS),
    summary="Change a webhook endpoint's url, events, description or enabled",
)
async def patch(
    request: Request, endpoint_id: Uuid, body: EndpointPatch, merchant: CurrentMerchant
) -> JsonResponse:
    """Only the fields given change; `enabled: true` re-enables an auto-disabled one."""
    state = api_state(request)
    url = None if body.url is None else _checked_url(state.settings, body.url)
    events = None if body.enabled_events is None else _checked_events(body.enabled_events)
    async with connection(state.pool) as conn, transaction(conn, state.settings):
        row = await update_endpoint(
            conn,
            _scope(merchant),
            endpoint_id,
            url=url,
            description=body.description,
            events=events,
            enabled=body.enabled,
        )
    return JsonResponse(endpoint_view(row))


@router.delete(
    "/webhook-endpoints/{endpoint_id}",
    status_code=204,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="Delete a webhook endpoint (nothing more is sent to it)",
)
async def delete(request: Request, endpoint_id: Uuid, merchant: CurrentMerchant) -> Response:
    """204; its delivery log stays readable through the events."""
    state = api_state(request)
    async with connection(state.pool) as conn, transaction(conn, state.settings):
        await delete_endpoint(conn, _scope(merchant), endpoint_id)
    return Response(status_code=204)


@router.post(
    "/webhook-endpoints/{endpoint_id}/rotate-secret",
    response_model=EndpointView,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="Rotate the endpoint's secret; both sign during the overlap window",
)
async def rotate(request: Request, endpoint_id: Uuid, merchant: CurrentMerchant) -> JsonResponse:
    """The new secret, once; the old one keeps signing (a second `v1,` entry) until
    `secret_rotation_overlap_until` (`WEBHOOK_ENDPOINT_ROTATION_OVERLAP_S`)."""
    state = api_state(request)
    overlap = state.settings.webhooks.webhook_endpoint_rotation_overlap_s
    async with connection(state.pool) as conn, transaction(conn, state.settings):
        row = await rotate_secret(
            conn, _scope(merchant), endpoint_id, new_webhook_secret(), overlap
        )
    return JsonResponse(endpoint_view(row, secret=True))
