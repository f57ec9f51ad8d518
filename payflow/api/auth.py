"""API-key authentication. Keys are stored as SHA-256 digests (`api_keys`, several per
merchant, each `read` or `write`, optionally expiring, revocable); lookups are by digest
and any direct comparison of secrets is constant-time.

A resolved key is cached per process for `API_AUTH_CACHE_SECONDS`, never past the key's
own expiry: a key revoked elsewhere stops working within that time. A `read` key is
refused (403) on every method but GET and HEAD, here, for every route that needs a key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from enum import StrEnum
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


KEY_PREFIX = "pf_live_"
# A key `new_api_key` makes: the prefix and 43 url-safe characters (32 random bytes). Keys
# of older releases (`pf_` + 43) and the bootstrap settings' keys have other shapes and
# still work: a key is found by its digest, whatever it looks like.
KEY_PATTERN = re.compile(r"pf_live_[A-Za-z0-9_-]{43}")
SAFE_METHODS = frozenset({"GET", "HEAD"})


class KeyScope(StrEnum):
    """What a key may do (mirrored by api_keys_scope_valid): `write` may move money."""

    READ = "read"
    WRITE = "write"


@dataclass(frozen=True, slots=True)
class Merchant:
    """The authenticated caller: the merchant and the key it presented."""

    id: UUID
    name: str
    is_admin: bool
    key_id: UUID
    scope: KeyScope


def hash_api_key(key: str) -> str:
    """SHA-256 hex of a key as presented. Keys are random and long, so no slow hash."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def new_api_key() -> str:
    """A fresh random API key (shown once, stored only as its hash).

    Invariant: it matches `KEY_PATTERN` (`pf_live_` + 43 url-safe characters, 256 random
    bits), so logs and secret scanners can tell a live payflow key at a glance."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def new_webhook_secret() -> str:
    """A fresh secret a merchant uses to verify the webhooks payflow sends it.

    Invariant: `whsec_` + STANDARD base64 of 32 random bytes, as the Standard Webhooks
    spec (and `payflow.webhooks.signing.secret_bytes`) decode it; url-safe base64 would
    not decode, or would decode to other bytes than a receiver's library uses.
    """
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


async def ensure_bootstrap_merchants(conn: asyncpg.Connection, settings: ApiSettings) -> None:
    """Make the API_KEY (and ADMIN_API_KEY) settings usable as merchants, each key its
    merchant's `default` write key; idempotent, and safe for replicas starting together
    (the caller's transaction holds an advisory lock while it checks and inserts).

    A bootstrap key already stored is left as it is: one an operator revoked stays
    revoked."""
    await conn.execute(SQL["lock_bootstrap"])
    for name, key, admin in (
        ("bootstrap", settings.api_key, False),
        ("bootstrap-admin", settings.admin_api_key, True),
    ):
        if key and not await conn.fetchval(SQL["api_key_exists"], hash_api_key(key)):
            merchant_id = await conn.fetchval(
                SQL["create_merchant"], name, new_webhook_secret(), admin
            )
            await conn.execute(
                SQL["insert_api_key"],
                merchant_id,
                "default",
                "write",
                hash_api_key(key),
                None,
                None,
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
    """Create a merchant with its `default` write key; returns (id, api key, webhook
    secret), both secrets shown once. Run it inside the caller's transaction (two rows).

    Raises `BadInput` for a name `valid_merchant_name` refuses."""
    if not valid_merchant_name(name):
        raise BadInput(MERCHANT_NAME_RULE)
    key, secret = new_api_key(), new_webhook_secret()
    merchant_id: UUID = await conn.fetchval(SQL["create_merchant"], name, secret, admin)
    await conn.execute(
        SQL["insert_api_key"], merchant_id, "default", "write", hash_api_key(key), key[-4:], None
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


def _forbidden_read_key() -> ApiProblem:
    return ApiProblem(
        403,
        "Forbidden",
        "this API key is read-only: only GET and HEAD requests may use it",
        slug="read-only-key",
    )


def _cached(state: ApiState, digest: str) -> Merchant | None:
    cached = state.auth_cache.get(digest)
    if cached is not None and cached[1] > time.monotonic() and isinstance(cached[0], Merchant):
        return cached[0]
    return None


def forget_key(state: ApiState, digest: str) -> None:
    """Drop a key from this process's cache (after revoking it here); other processes
    drop it within `API_AUTH_CACHE_SECONDS`."""
    state.auth_cache.pop(digest, None)


async def key_by_hash(conn: Connection, digest: str) -> tuple[Merchant, float | None] | None:
    """The live key (not revoked, not expired) whose digest is `digest` (`hash_api_key`),
    as (caller, seconds until the key expires or None), or None.

    Stamps the key's `last_used_at` in the same statement when it is older than a minute
    (skipping a key whose row is locked): at most one write per key per minute."""
    row = await conn.fetchrow(SQL["api_key_by_hash"], digest)
    if row is None:
        return None
    merchant = Merchant(
        id=row["merchant_id"],
        name=row["name"],
        is_admin=row["is_admin"],
        key_id=row["id"],
        scope=KeyScope(row["scope"]),
    )
    left = row["expires_in"]
    return merchant, (float(left) if left is not None else None)


async def merchant_by_key_hash(conn: Connection, digest: str) -> Merchant | None:
    """The caller whose live API key hashes to `digest` (`hash_api_key`), or None."""
    found = await key_by_hash(conn, digest)
    return found[0] if found is not None else None


async def _lookup(state: ApiState, digest: str) -> Merchant | None:
    now = time.monotonic()
    async with connection(state.pool) as conn:
        found = await key_by_hash(conn, digest)
    if found is None:
        return None
    merchant, expires_in = found
    ttl = state.settings.api_auth_cache_seconds
    if expires_in is not None:
        ttl = min(ttl, expires_in)  # never cached past the key's own expiry
    if ttl > 0:
        if len(state.auth_cache) > 10_000:
            state.auth_cache.clear()
        state.auth_cache[digest] = (merchant, now + ttl)
    return merchant


async def authenticate(
    request: Request, api_key: Annotated[str | None, Depends(api_key_scheme)]
) -> Merchant:
    """Resolve X-API-Key to a merchant and count the request against its rate limit.

    Invariants: a missing, unknown, revoked, expired, over-long or non-ASCII key is a
    401, never a 500; a `read` key on any method but GET and HEAD is a 403 (every route
    that depends on this, so also routes added later).
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
    if merchant.scope is not KeyScope.WRITE and request.method not in SAFE_METHODS:
        raise _forbidden_read_key()
    return merchant


async def require_admin(merchant: Annotated[Merchant, Depends(authenticate)]) -> Merchant:
    """Operator-only endpoints: the caller must hold an admin key."""
    if not merchant.is_admin:
        raise ApiProblem(403, "Forbidden", "this endpoint needs an admin key", slug="forbidden")
    return merchant


CurrentMerchant = Annotated[Merchant, Depends(authenticate)]
AdminMerchant = Annotated[Merchant, Depends(require_admin)]
