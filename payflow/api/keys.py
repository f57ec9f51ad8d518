"""A merchant's API keys: create (the key shown once), list, read and revoke.

Used by the API's `/api/v1/api-keys` routes, the console's key page and `payflow
merchants keys`. Every function takes a connection and never commits: the caller owns
the transaction. Keys live in `api_keys` (migration 0038) as SHA-256 digests only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import asyncpg

from payflow.api.auth import SQL, KeyScope, hash_api_key, new_api_key
from payflow.api.checks import utc_bound
from payflow.api.db import connection
from payflow.config import DatabaseSettings
from payflow.db.pool import tool_pool
from payflow.db.tx import transaction
from payflow.errors import BadInput, Conflict, NotFound
from payflow.observability import log
from payflow.text import unsafe_text_reason

MAX_KEY_NAME = 100  # api_keys_name_length
KEY_NAME_RULE = (
    f"a key name is 1 to {MAX_KEY_NAME} printable characters"
    " (no NUL, control characters or line breaks)"
)
LIST_LIMIT = 1000  # keys shown per list, oldest first; a merchant needs a handful
MAX_ACTIVE_KEYS = 100  # active keys per merchant (checked before each create)


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One key as a merchant sees it (never its secret or digest)."""

    id: UUID
    merchant_id: UUID
    merchant_name: str | None
    name: str
    scope: KeyScope
    hint: str | None  # the key's last four characters (None for keys of older releases)
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None

    def live_at(self, moment: datetime) -> bool:
        """Not revoked and not expired at `moment`."""
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > moment)

    @property
    def status(self) -> str:
        """`active`, `expired` or `revoked` now (revocation wins)."""
        if self.revoked_at is not None:
            return "revoked"
        return "active" if self.live_at(datetime.now(UTC)) else "expired"


def _key(row: Any, merchant_name: str | None = None) -> ApiKey:
    return ApiKey(
        id=row["id"],
        merchant_id=row["merchant_id"],
        merchant_name=row.get("merchant_name", merchant_name),
        name=row["name"],
        scope=KeyScope(row["scope"]),
        hint=row["hint"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        last_used_at=row["last_used_at"],
    )


def checked_name(name: str) -> str:
    """`name` stripped of surrounding blanks when it is 1 to `MAX_KEY_NAME` printable
    characters; else `BadInput` with `KEY_NAME_RULE`."""
    cleaned = name.strip()
    reason = unsafe_text_reason(cleaned)
    if reason is not None:
        raise BadInput(f"a key name {reason}")
    if not 1 <= len(cleaned) <= MAX_KEY_NAME or not cleaned.isprintable():
        raise BadInput(KEY_NAME_RULE)
    return cleaned


def checked_scope(scope: str) -> KeyScope:
    """`scope` as a `KeyScope`; `BadInput` unless it is `read` or `write`."""
    try:
        return KeyScope(scope)
    except ValueError:
        raise BadInput("a key's scope is read or write") from None


def checked_expiry(expires_at: datetime | None) -> datetime | None:
    """An expiry in UTC that is in the future (or None: never expires); `BadInput` for
    a naive time or one not after now."""
    if expires_at is None:
        return None
    if expires_at.tzinfo is None or expires_at.utcoffset() is None:
        raise BadInput("an expiry needs a time zone (for example Z)")
    try:
        moment = utc_bound(expires_at)
    except ValueError as error:
        raise BadInput(f"expiry: {error}") from None
    if moment is None or moment <= datetime.now(UTC):
        raise BadInput("an expiry must be in the future")
    return moment


async def create_key(
    conn: asyncpg.Connection,
    merchant_id: UUID,
    name: str,
    scope: str,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """Create a key for `merchant_id`; returns (the key's record, the key itself), the
    key to be shown once and never again (only its SHA-256 is stored).

    Raises `BadInput` for a name, scope or expiry the checks above refuse, `Conflict`
    when the merchant already has `MAX_ACTIVE_KEYS` active keys (two creates racing may
    pass it by one: the cap bounds growth, it guards no money)."""
    clean_name, clean_scope = checked_name(name), checked_scope(scope)
    moment = checked_expiry(expires_at)
    if await conn.fetchval(SQL["count_active_keys"], merchant_id) >= MAX_ACTIVE_KEYS:
        raise Conflict(f"a merchant has at most {MAX_ACTIVE_KEYS} active keys: revoke one first")
    key = new_api_key()
    row = await conn.fetchrow(
        SQL["insert_api_key"],
        merchant_id,
        clean_name,
        clean_scope.value,
        hash_api_key(key),
        key[-4:],
        moment,
    )
    record = _key(row)
    log.info(
        "payflow.api.key_created",
        merchant_id=str(merchant_id),
        key_id=str(record.id),
        scope=record.scope.value,
    )
    return record, key


async def list_keys(conn: asyncpg.Connection, merchant_id: UUID | None) -> list[ApiKey]:
    """The keys of `merchant_id` (every merchant's when None), revoked ones included,
    oldest first per merchant; at most `LIST_LIMIT`."""
    rows = await conn.fetch(SQL["list_api_keys"], merchant_id, LIST_LIMIT)
    return [_key(row) for row in rows]


async def get_key(conn: asyncpg.Connection, key_id: UUID, merchant_id: UUID | None) -> ApiKey:
    """The key `key_id` if it belongs to `merchant_id` (any merchant when None); else
    `NotFound` (another merchant's key is as unknown as a key that does not exist)."""
    row = await conn.fetchrow(SQL["get_api_key"], key_id, merchant_id)
    if row is None:
        raise NotFound(f"API key {key_id} does not exist")
    return _key(row)


async def revoke_key(
    conn: asyncpg.Connection, key_id: UUID, merchant_id: UUID, *, keep_a_write_key: bool = True
) -> tuple[ApiKey, str | None]:
    """Revoke `key_id` of `merchant_id`; returns (the key as it is now, the digest to drop
    from the auth cache, or None when it was revoked already: revoking is idempotent and
    keeps the first revocation time).

    Raises `NotFound` for an unknown key or another merchant's, and `Conflict` when
    `keep_a_write_key` and this is the merchant's last live write key (the merchant could
    not create another key afterwards; an operator's CLI may force it). The merchant's
    keys are locked (`FOR UPDATE`) until the caller's transaction ends, so two concurrent
    revocations cannot both remove "the other" last write key."""
    keys = await conn.fetch(SQL["lock_merchant_keys"], merchant_id)
    target = next((k for k in keys if k["id"] == key_id), None)
    if target is None:
        raise NotFound(f"API key {key_id} does not exist")
    is_live_write = target["live"] and target["scope"] == KeyScope.WRITE.value
    others = [k for k in keys if k["id"] != key_id and k["live"] and k["scope"] == "write"]
    if keep_a_write_key and is_live_write and not others:
        raise Conflict(
            "this is the merchant's last active write key: create another write key first"
        )
    digest: str | None = await conn.fetchval(SQL["revoke_api_key"], key_id, merchant_id)
    if digest is not None:
        log.info("payflow.api.key_revoked", merchant_id=str(merchant_id), key_id=str(key_id))
    return await get_key(conn, key_id, merchant_id), digest


# --- `payflow merchants keys`: each call in its own short transaction on a tool pool ----


async def create_key_cli(
    settings: DatabaseSettings,
    merchant_id: UUID,
    name: str,
    scope: str,
    expires_at: datetime | None,
) -> tuple[ApiKey, str]:
    """`create_key` for an operator; `NotFound` when the merchant does not exist."""
    async with tool_pool(settings) as pool, connection(pool) as conn:
        async with transaction(conn, settings):
            if not await conn.fetchval(SQL["merchant_exists"], merchant_id):
                raise NotFound(f"merchant {merchant_id} does not exist")
            return await create_key(conn, merchant_id, name, scope, expires_at)


async def list_keys_cli(settings: DatabaseSettings, merchant_id: UUID | None) -> list[ApiKey]:
    """`list_keys` for an operator (every merchant's when `merchant_id` is None)."""
    async with tool_pool(settings) as pool, connection(pool) as conn:
        return await list_keys(conn, merchant_id)


async def revoke_key_cli(
    settings: DatabaseSettings, key_id: UUID, *, force: bool
) -> tuple[ApiKey, bool, bool]:
    """Revoke any merchant's key; returns (the key now, whether this call revoked it,
    whether it was its merchant's last active write key). Without `force` the last write
    key is refused (`Conflict`), as in the API. `NotFound` for an unknown key."""
    async with tool_pool(settings) as pool, connection(pool) as conn:
        async with transaction(conn, settings):
            found = await get_key(conn, key_id, None)
            before = await conn.fetch(SQL["lock_merchant_keys"], found.merchant_id)
            writes = [k for k in before if k["live"] and k["scope"] == KeyScope.WRITE.value]
            last = [k["id"] for k in writes] == [key_id]
            key, digest = await revoke_key(
                conn, key_id, found.merchant_id, keep_a_write_key=not force
            )
            return key, digest is not None, last
