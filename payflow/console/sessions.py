"""Console sign-in, server-side sessions, CSRF tokens and the sign-in failure limit.

A browser signs in with an API key (the same keys and digests as `payflow.api.auth`).
It gets a random session token in a cookie signed with itsdangerous (HttpOnly,
SameSite=Strict, Path=/console, Secure behind HTTPS, Max-Age = the session lifetime).
PostgreSQL keeps only the token's SHA-256 (`console_sessions`), the merchant, the API key
it signed in with, the CSRF token, the expiry and the revocation time: sign-out revokes the
row, so a copy of the cookie stops working at once, and so does revoking (or the expiry
of) the key it signed in with. A session keeps its key's scope: a `read` key's session
shows pages but may not submit a form that changes anything. Failed sign-ins are counted
per client address in Redis and refused over `CONSOLE_SIGNIN_MAX_FAILURES` per
`CONSOLE_SIGNIN_WINDOW_S`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Literal

import asyncpg
from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from redis.asyncio import Redis
from redis.exceptions import RedisError

from payflow.api.auth import (
    MAX_KEY_LENGTH,
    KeyScope,
    Merchant,
    hash_api_key,
    merchant_by_key_hash,
)
from payflow.api.db import connection
from payflow.config import ConsoleSettings, Settings
from payflow.db.queries import load_queries
from payflow.observability import log

SQL = load_queries("payflow.console")

COOKIE = "payflow_console"
PRE_COOKIE = "payflow_console_signin"  # carries the sign-in form's CSRF token
COOKIE_PATH = "/console"
PRE_SESSION_MAX_AGE_S = 3600


@dataclass(frozen=True, slots=True)
class Session:
    """A live console session: who signed in and the CSRF token its forms carry."""

    merchant: Merchant
    csrf_token: str
    token_sha256: str


class SignInRefused(Exception):
    """A sign-in that failed; `status` 401 (bad key) or 429 (too many failures)."""

    def __init__(self, status: Literal[401, 429], message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def signing_secret(settings: Settings) -> bytes:
    """CONSOLE_SECRET, or a key derived from PROVIDER_WEBHOOK_SECRET (HMAC with a label),
    so every API replica signs alike without one more secret to distribute."""
    if settings.console_secret is not None:
        return settings.console_secret.get_secret_value().encode()
    base = (settings.provider_webhook_secret or "").encode()
    return hmac.new(base, b"payflow-console-cookie-v1", hashlib.sha256).digest()


def serializer(settings: Settings, salt: str) -> URLSafeTimedSerializer:
    """The itsdangerous signer of one cookie kind (`salt` keeps kinds apart)."""
    return URLSafeTimedSerializer(signing_secret(settings), salt=salt)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def cookie_secure(request: Request, settings: ConsoleSettings) -> bool:
    """Whether cookies get the Secure flag: always/never, or auto (HTTPS seen)."""
    if settings.console_cookie_secure != "auto":
        return settings.console_cookie_secure == "always"
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


def set_cookie(
    response: Response,
    request: Request,
    settings: ConsoleSettings,
    name: str,
    value: str,
    max_age: int,
) -> None:
    """Set a console cookie: HttpOnly, SameSite=Strict, Path=/console, Secure behind HTTPS."""
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=cookie_secure(request, settings),
    )


def clear_cookie(
    response: Response, request: Request, settings: ConsoleSettings, name: str
) -> None:
    """Expire a console cookie in the browser."""
    response.delete_cookie(
        name,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=cookie_secure(request, settings),
    )


def signin_token(request: Request, settings: Settings) -> tuple[str, str | None]:
    """The sign-in form's CSRF token: the one in the pre-session cookie, or a new one
    (then also its signed cookie value to set)."""
    raw = request.cookies.get(PRE_COOKIE)
    if raw:
        try:
            token = serializer(settings, "signin").loads(raw, max_age=PRE_SESSION_MAX_AGE_S)
            if isinstance(token, str):
                return token, None
        except BadSignature:
            pass
    token = secrets.token_urlsafe(32)
    return token, serializer(settings, "signin").dumps(token)


def tokens_match(expected: str, presented: str | None) -> bool:
    """Constant-time comparison of a CSRF token as presented."""
    if not presented:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode("utf-8", "replace"))


def client_address(request: Request) -> str:
    """The client address the sign-in limit counts against (the peer; no header trust)."""
    return request.client.host if request.client else "unknown"


def _failure_key(settings: Settings, address: str) -> str:
    window = int(time.time() // settings.console_signin_window_s)
    return f"{settings.redis_key_prefix}console:signin-fail:{address}:{window}"


async def failures(redis: Redis, settings: Settings, address: str) -> int:
    """Failed sign-ins from `address` in the current window (0 when Redis is down:
    the limit protects against guessing, keys are 256-bit random; it fails open, logged)."""
    try:
        value = await redis.get(_failure_key(settings, address))
    except (RedisError, OSError) as error:
        log.warning("payflow.console.ratelimit_unavailable", error=str(error))
        return 0
    return int(value or 0)


async def count_failure(redis: Redis, settings: Settings, address: str) -> None:
    """Count one failed sign-in from `address` in the current window."""
    key = _failure_key(settings, address)
    try:
        async with redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, settings.console_signin_window_s + 5)
            await pipe.execute()
    except (RedisError, OSError) as error:
        log.warning("payflow.console.ratelimit_unavailable", error=str(error))


async def sign_in(
    pool: asyncpg.Pool, redis: Redis, settings: Settings, api_key: str, address: str
) -> tuple[str, Merchant]:
    """Exchange an API key for a new session; returns (signed cookie value, merchant).

    Raises `SignInRefused` 429 once `address` failed too often in the window (checked
    before the key), 401 for a missing, malformed or unknown key (counted as a failure).
    Invariant: the table stores only the token's SHA-256; the key is never logged.
    """
    limit = settings.console_signin_max_failures
    if await failures(redis, settings, address) >= limit:
        raise SignInRefused(
            429,
            f"too many failed sign-ins from this address; wait up to "
            f"{settings.console_signin_window_s} s and try again",
        )
    key = api_key.strip()
    merchant = None
    if key and len(key) <= MAX_KEY_LENGTH and key.isascii() and key.isprintable():
        async with connection(pool) as conn:
            merchant = await merchant_by_key_hash(conn, hash_api_key(key))
    if merchant is None:
        await count_failure(redis, settings, address)
        log.info("payflow.console.signin_failed", client=address)
        raise SignInRefused(401, "that API key is not valid")
    token = secrets.token_urlsafe(32)
    async with connection(pool) as conn:
        await conn.execute(SQL["delete_expired_sessions"])
        await conn.execute(
            SQL["insert_session"],
            _digest(token),
            merchant.id,
            merchant.key_id,
            secrets.token_urlsafe(32),
            settings.console_session_ttl_s,
        )
    log.info("payflow.console.signed_in", merchant_id=str(merchant.id), admin=merchant.is_admin)
    return serializer(settings, "session").dumps(token), merchant


async def session_of(pool: asyncpg.Pool, settings: Settings, cookie: str | None) -> Session | None:
    """The live session of a cookie value; None when missing, badly signed, older than
    the session lifetime, expired, revoked, or signed in with a key since revoked or
    expired."""
    if not cookie:
        return None
    try:
        token = serializer(settings, "session").loads(
            cookie, max_age=int(settings.console_session_ttl_s)
        )
    except BadSignature:
        return None
    if not isinstance(token, str):
        return None
    digest = _digest(token)
    async with connection(pool) as conn:
        row = await conn.fetchrow(SQL["live_session"], digest)
    if row is None:
        return None
    merchant = Merchant(
        id=row["merchant_id"],
        name=row["name"],
        is_admin=row["is_admin"],
        key_id=row["api_key_id"],
        scope=KeyScope(row["scope"]),
    )
    return Session(merchant, row["csrf_token"], digest)


async def sign_out(pool: asyncpg.Pool, session: Session) -> None:
    """Revoke the session server-side; its cookie never works again."""
    async with connection(pool) as conn:
        await conn.execute(SQL["revoke_session"], session.token_sha256)
    log.info("payflow.console.signed_out", merchant_id=str(session.merchant.id))
