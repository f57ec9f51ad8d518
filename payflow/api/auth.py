"""API-key authentication. Keys are stored as SHA-256 digests; lookups are by digest
and any direct comparison of secrets is constant-time."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Annotated
from uuid import UUID

import asyncpg
from fastapi import Depends, Request
from fastapi.security import APIKeyHeader

from payflow.config import ApiSettings
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.errors import BadInput

from .db import connection
from .errors import ApiProblem
from .headers import sent_more_than_once
from .ratelimit import hit, refuse_if_spent
from .state import ApiState, api_state

SQL = load_queries("payflow.api")
API_KEY_HEADER = "X-API-Key"
MAX_KEY_LENGTH = 256

api_key_scheme = APIKeyHeader(name=API_KEY_HEADER, auto_error=False)


@dataclass(frozen=True, slots=True)
class Merchant:
    """The authenticated caller."""

    id: UUID
    name: str
    is_admin: bool


def hash_api_key(key: str) -> str:
    """SHA-256 hex of a key as presented. Keys are random and long, so no slow hash."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def new_api_key() -> str:
    """A fresh random API key (shown once, stored only as its hash)."""
    return "pf_" + secrets.token_urlsafe(32)


def new_webhook_secret() -> str:
    """A fresh secret a merchant uses to verify the webhooks payflow sends it.

    Invariant: `whsec_` + STANDARD base64 of 32 random bytes, as the Standard Webhooks
    spec (and `payflow.webhooks.signing.secret_bytes`) decode it; url-safe base64 would
    not decode, or would decode to other bytes than a receiver's library uses.
    """
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


async def ensure_bootstrap_merchants(conn: asyncpg.Connection, settings: ApiSettings) -> None:
    """Make the API_KEY (and ADMIN_API_KEY) settings usable as merchants; idempotent."""
    for name, key, admin in (
        ("bootstrap", settings.api_key, False),
        ("bootstrap-admin", settings.admin_api_key, True),
    ):
        if key:
            await conn.execute(
                SQL["ensure_merchant"], name, hash_api_key(key), new_webhook_secret(), admin
            )


MAX_MERCHANT_NAME = 200  # merchants_name_length (migration 0002)
MERCHANT_NAME_RULE = (
    f"a merchant name is 1 to {MAX_MERCHANT_NAME} printable characters"
    " (no NUL, control characters or line breaks)"
)


def valid_merchant_name(name: str) -> bool:
    """True when `name` fits merchants_name_length and holds only printable characters:
    names are printed in CLI tables, the console and logs, where a control character
    (an escape sequence, a newline) would rewrite what an operator reads."""
    return 1 <= len(name) <= MAX_MERCHANT_NAME and name.isprintable()


async def create_merchant(
    conn: asyncpg.Connection, name: str, *, admin: bool
) -> tuple[UUID, str, str]:
    """Create a merchant; returns (id, api key, webhook secret), both secrets shown once.

    Raises `BadInput` for a name `valid_merchant_name` refuses."""
    if not valid_merchant_name(name):
        raise BadInput(MERCHANT_NAME_RULE)
    key, secret = new_api_key(), new_webhook_secret()
    merchant_id: UUID = await conn.fetchval(
        SQL["create_merchant"], name, hash_api_key(key), secret, admin
    )
    return merchant_id, key, secret


def _unauthorized(detail: str) -> ApiProblem:
    return ApiProblem(
        401,
        "Unauthorized",
        detail,
        slug="unauthorized",
        headers={"WWW-Authenticate": API_KEY_HEADER},
    )


def _cached(state: ApiState, digest: str) -> Merchant | None:
    cached = state.auth_cache.get(digest)
    if cached is not None and cached[1] > time.monotonic() and isinstance(cached[0], Merchant):
        return cached[0]
    return None


async def merchant_by_key_hash(conn: Connection, digest: str) -> Merchant | None:
    """The merchant whose API key hashes to `digest` (`hash_api_key`), or None."""
    row = await conn.fetchrow(SQL["merchant_by_key_hash"], digest)
    if row is None:
        return None
    return Merchant(id=row["id"], name=row["name"], is_admin=row["is_admin"])


async def _lookup(state: ApiState, digest: str) -> Merchant | None:
    now = time.monotonic()
    async with connection(state.pool) as conn:
        merchant = await merchant_by_key_hash(conn, digest)
    if merchant is None:
        return None
    if state.settings.api_auth_cache_seconds > 0:
        if len(state.auth_cache) > 10_000:
            state.auth_cache.clear()
        state.auth_cache[digest] = (merchant, now + state.settings.api_auth_cache_seconds)
    return merchant


async def authenticate(
    request: Request, api_key: Annotated[str | None, Depends(api_key_scheme)]
) -> Merchant:
    """Resolve X-API-Key to a merchant and count the request against its rate limit.

    Invariant: a missing, unknown, over-long or non-ASCII key is a 401, never a 500.
    """
    # The optional whitespace around a header value is not part of it (RFC 9110 §5.5), as
    # for Idempotency-Key: a trailing space or tab does not turn a good key into a 401.
    api_key = api_key.strip(" \t") if api_key else api_key
    if not api_key:
        raise _unauthorized("missing X-API-Key header")
    if sent_more_than_once(request, API_KEY_HEADER):
        raise _unauthorized("X-API-Key must be sent once")
    if len(api_key) > MAX_KEY_LENGTH or not api_key.isascii() or not api_key.isprintable():
        raise _unauthorized("invalid API key")
    state = api_state(request)
    settings = state.settings
    digest = hash_api_key(api_key)
    merchant = _cached(state, digest)
    if merchant is None:
        # Keys that resolve to nobody are counted per client address: past
        # AUTH_FAILURES_PER_MINUTE its requests are 429 before any database lookup.
        failures = f"authfail:{request.client.host if request.client else 'unknown'}"
        limit = settings.auth_failures_per_minute
        await refuse_if_spent(state.redis, settings.redis_key_prefix, failures, limit)
        merchant = await _lookup(state, digest)
        if merchant is None:
            # Spend a comparison anyway so unknown keys cost about as much as known ones.
            hmac.compare_digest(digest.encode(), hashlib.sha256(b"").hexdigest().encode())
            await hit(state.redis, settings.redis_key_prefix, failures, limit)
            raise _unauthorized("invalid API key")
    await hit(
        state.redis, settings.redis_key_prefix, f"m:{merchant.id}", settings.rate_limit_per_minute
    )
    return merchant


async def require_admin(merchant: Annotated[Merchant, Depends(authenticate)]) -> Merchant:
    """Operator-only endpoints: the caller must hold an admin key."""
    if not merchant.is_admin:
        raise ApiProblem(403, "Forbidden", "this endpoint needs an admin key", slug="forbidden")
    return merchant


CurrentMerchant = Annotated[Merchant, Depends(authenticate)]
AdminMerchant = Annotated[Merchant, Depends(require_admin)]
