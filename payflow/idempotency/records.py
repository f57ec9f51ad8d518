"""Request idempotency records for mutating API calls (after the IETF
Idempotency-Key draft): payments and withdrawals.

Records are scoped per merchant and operation. A request takes a transaction-level
advisory lock on its key and reads any stored record in one round trip:

- lock busy -> 409 "in progress" (another request with this key is running);
- stored with another request hash -> 409 (key reused with a different body);
- stored with the same hash -> the stored response, replayed byte for byte;
- nothing stored -> the caller does the work and stores its response in the same
  transaction, so the record exists if and only if the work committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg
import orjson

from payflow.db.queries import load_queries
from payflow.errors import Conflict
from payflow.idempotency import idempotency_key

SQL = load_queries("payflow.idempotency")

KEY_PATTERN = r"^[!-~]{1,255}$"
RACE_CONSTRAINTS = frozenset({"api_idempotency_pkey", "payments_merchant_idempotency_unique"})


class IdempotencyInProgress(Conflict):
    """Another request holding this Idempotency-Key is still running (409, retry later)."""


class IdempotencyKeyReused(Conflict):
    """The Idempotency-Key was already used with a different request body (409)."""


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A response recorded under an Idempotency-Key."""

    status: int
    body: dict[str, Any]


def request_hash(scope: str, body: dict[str, Any]) -> str:
    """Digest of the operation and its canonical JSON body (key order does not matter)."""
    canonical = orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode()
    return idempotency_key(scope, canonical)


def lock_key(merchant_id: UUID, scope: str, key: str) -> int:
    """A signed 64-bit advisory lock id for (merchant, scope, key)."""
    digest = idempotency_key("api.idempotency", str(merchant_id), scope, key)
    return int.from_bytes(bytes.fromhex(digest[:16]), "big", signed=True)


def is_key_race(exc: BaseException) -> bool:
    """True when a unique violation means a concurrent request stored the same key first."""
    return (
        isinstance(exc, asyncpg.UniqueViolationError)
        and getattr(exc, "constraint_name", None) in RACE_CONSTRAINTS
    )


async def lookup(
    conn: asyncpg.Connection, merchant_id: UUID, scope: str, key: str, req_hash: str
) -> StoredResponse | None:
    """Lock the key for this transaction and return a replayable response, if any.

    Raises `IdempotencyInProgress` when the key is in flight elsewhere or was used with
    another body. Must run inside the caller's transaction.
    """
    row = await conn.fetchrow(
        SQL["idempotency_lookup"], lock_key(merchant_id, scope, key), merchant_id, scope, key
    )
    assert row is not None  # the query always yields one row
    return check_stored(row, req_hash)


def check_stored(row: Any, req_hash: str) -> StoredResponse | None:
    """Judge a lookup row (`locked`, `request_hash`, `state`, `response_*`).

    None means the lock is ours and nothing is stored: go ahead. Otherwise raise the
    `IdempotencyInProgress` or `IdempotencyKeyReused`, or return the stored response to replay.
    """
    if not row["locked"]:
        raise _in_progress()
    if row["state"] is None:
        return None
    if row["request_hash"] != req_hash:
        raise IdempotencyKeyReused(
            "this Idempotency-Key was already used with a different request body"
        )
    if row["state"] != "completed":
        raise _in_progress()
    return StoredResponse(status=row["response_status"], body=row["response_body"])


def _in_progress() -> IdempotencyInProgress:
    return IdempotencyInProgress(
        "a request with this Idempotency-Key is still in progress; retry later"
    )


async def store(
    conn: asyncpg.Connection,
    merchant_id: UUID,
    scope: str,
    key: str,
    req_hash: str,
    response: StoredResponse,
) -> None:
    """Record the response under the key, in the transaction that did the work."""
    await conn.execute(
        SQL["idempotency_store"], merchant_id, scope, key, req_hash, response.status, response.body
    )
