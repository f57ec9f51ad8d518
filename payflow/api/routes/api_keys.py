"""A merchant's own API keys: create (the key in the answer, once), list, read, revoke.

Every route here needs a key, so a `read` key may list and read but not create or
revoke (the 403 comes from `payflow.api.auth.authenticate`, as on every other route). An
admin key manages its own merchant's keys here like any other; operators manage every
merchant's keys with `payflow merchants keys` and the console.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Request
from pydantic import AwareDatetime, BaseModel, BeforeValidator, Field, field_validator

from payflow.api.auth import KEY_PATTERN, CurrentMerchant, forget_key
from payflow.api.checks import Uuid, rfc3339_text
from payflow.api.db import connection
from payflow.api.errors import FieldError
from payflow.api.keys import (
    MAX_KEY_NAME,
    ApiKey,
    checked_expiry,
    checked_name,
    create_key,
    get_key,
    list_keys,
    revoke_key,
)
from payflow.api.responses import JsonResponse, iso
from payflow.api.routing import api_router
from payflow.api.schemas import COMMON_PROBLEMS, Strict, problem_responses
from payflow.api.state import api_state
from payflow.db.tx import transaction
from payflow.errors import BadInput

router = api_router(prefix="/api/v1", tags=["api keys"])


def _timestamp_text(value: object) -> object:
    """Only RFC 3339 text is an expiry: a JSON number would be read as epoch seconds."""
    if value is not None and not isinstance(value, str):
        raise ValueError("must be an RFC 3339 timestamp string, such as 2027-01-01T00:00:00Z")
    return rfc3339_text(value)


class ApiKeyCreate(Strict):
    name: str = Field(min_length=1, max_length=MAX_KEY_NAME, examples=["checkout server"])
    scope: Literal["read", "write"] = Field(
        description="`write` may move money; `read` may only GET and HEAD"
    )
    expires_at: Annotated[AwareDatetime | None, BeforeValidator(_timestamp_text)] = Field(
        default=None, description="RFC 3339 with an offset, in the future; absent: never"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        try:
            return checked_name(value)
        except BadInput as error:
            raise ValueError(str(error)) from None


class ApiKeyView(BaseModel):
    id: str
    name: str
    scope: Literal["read", "write"]
    status: Literal["active", "expired", "revoked"]
    hint: str | None = Field(description="The key's last four characters (absent for old keys)")
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    last_used_at: str | None = Field(description="Updated at most about once a minute")


class ApiKeyCreated(ApiKeyView):
    key: str = Field(
        description="The key itself, shown in this answer only; payflow keeps its SHA-256",
        pattern=KEY_PATTERN.pattern,
    )


class ApiKeyPage(BaseModel):
    items: list[ApiKeyView]


def key_view(key: ApiKey) -> dict[str, Any]:
    """The wire form of a key (never its secret or digest)."""
    return {
        "id": str(key.id),
        "name": key.name,
        "scope": key.scope.value,
        "status": key.status,
        "hint": key.hint,
        "created_at": iso(key.created_at),
        "expires_at": iso(key.expires_at),
        "revoked_at": iso(key.revoked_at),
        "last_used_at": iso(key.last_used_at),
    }


@router.post(
    "/api-keys",
    status_code=201,
    response_model=ApiKeyCreated,
    responses=problem_responses(400, 403, 409, 415, *COMMON_PROBLEMS),
    summary="Create an API key for the calling merchant (the key is shown once)",
)
async def create(request: Request, body: ApiKeyCreate, merchant: CurrentMerchant) -> JsonResponse:
    """Needs a write key. The answer's `key` is the only time payflow shows it. 409 when
    the merchant has `MAX_ACTIVE_KEYS` (100) active keys already."""
    state = api_state(request)
    expires_at: datetime | None
    try:
        expires_at = checked_expiry(body.expires_at)
    except BadInput as error:
        raise FieldError("body.expires_at", str(error)) from None
    async with connection(state.pool) as conn, transaction(conn, state.settings):
        record, key = await create_key(conn, merchant.id, body.name, body.scope, expires_at)
    return JsonResponse({**key_view(record), "key": key}, status_code=201)


@router.get(
    "/api-keys",
    response_model=ApiKeyPage,
    responses=problem_responses(*COMMON_PROBLEMS),
    summary="The calling merchant's API keys, revoked and expired ones included",
)
async def list_(request: Request, merchant: CurrentMerchant) -> JsonResponse:
    """Oldest first; no secrets, only each key's last four characters."""
    state = api_state(request)
    async with connection(state.pool) as conn:
        keys = await list_keys(conn, merchant.id)
    return JsonResponse({"items": [key_view(key) for key in keys]})


@router.get(
    "/api-keys/{key_id}",
    response_model=ApiKeyView,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="One of the calling merchant's API keys",
)
async def read(request: Request, key_id: Uuid, merchant: CurrentMerchant) -> JsonResponse:
    """Another merchant's key is a 404, like a key that does not exist."""
    state = api_state(request)
    async with connection(state.pool) as conn:
        key = await get_key(conn, key_id, merchant.id)
    return JsonResponse(key_view(key))


@router.delete(
    "/api-keys/{key_id}",
    response_model=ApiKeyView,
    responses=problem_responses(403, 404, 409, *COMMON_PROBLEMS),
    summary="Revoke one of the calling merchant's API keys",
)
async def revoke(request: Request, key_id: Uuid, merchant: CurrentMerchant) -> JsonResponse:
    """Needs a write key. Idempotent (a revoked key keeps its first `revoked_at`). The
    merchant's last active write key cannot be revoked here (409): create another first.
    This process forgets the key at once; other API processes within
    `API_AUTH_CACHE_SECONDS`."""
    state = api_state(request)
    async with connection(state.pool) as conn, transaction(conn, state.settings):
        key, digest = await revoke_key(conn, key_id, merchant.id)
    if digest is not None:
        forget_key(state, digest)
    return JsonResponse(key_view(key))
