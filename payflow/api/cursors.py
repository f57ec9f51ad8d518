"""Keyset cursors: opaque text naming the last item of a page (its time and id) and the
listing it was made for.

A cursor carries a short digest of its listing (the route, the order and every filter):
reused with another order or other filters it would silently page another way, so
`decode_cursor` answers 422 on `query.cursor` instead. The digest binds, it does not
authenticate: a cursor is the client's own position, and what it decodes to is checked
as strictly as any other input before it reaches SQL.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from datetime import datetime
from typing import Any, overload
from uuid import UUID

import orjson

from payflow.api.checks import clean_text, utc_bound
from payflow.api.errors import FieldError

NOT_A_CURSOR = "is not a cursor returned by this endpoint"
OTHER_LISTING = (
    "was returned for another order or other filters: send it with the order and filters"
    " of the request that returned it"
)


def listing_digest(route: str, **filters: object) -> str:
    """A short digest of `route` and its `filters` (None, lists sorted, times in UTC):
    what a cursor is bound to."""
    canonical: dict[str, Any] = {}
    for name, value in sorted(filters.items()):
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, list | tuple | set | frozenset):
            value = sorted(str(item) for item in value)
        elif value is not None:
            value = str(value)
        canonical[name] = value
    raw = orjson.dumps([route, canonical])
    return hashlib.sha256(raw).hexdigest()[:16]


def encode_cursor(created_at: datetime, item_id: UUID | str, listing: str) -> str:
    """An opaque cursor naming the last item of a page and its `listing_digest`."""
    raw = orjson.dumps([created_at.isoformat(), str(item_id), listing])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@overload
def decode_cursor(cursor: str, listing: str) -> tuple[datetime, UUID]: ...
@overload
def decode_cursor(cursor: str, listing: str, *, id_kind: type[str]) -> tuple[datetime, str]: ...


def decode_cursor(cursor: str, listing: str, *, id_kind: type[Any] = UUID) -> tuple[datetime, Any]:
    """Inverse of `encode_cursor`; `FieldError` (422 on `query.cursor`) for anything it did
    not produce, or a cursor made for another listing (`listing` differs)."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, item_id, made_for = orjson.loads(raw)
        if not all(isinstance(part, str) for part in (created_at, item_id, made_for)):
            raise ValueError("not a cursor")
        moment = datetime.fromisoformat(created_at)
        if moment.tzinfo is None:
            raise ValueError("not a cursor")
        position = utc_bound(moment) or moment, id_kind(clean_text(item_id))
    except (ValueError, TypeError, binascii.Error, orjson.JSONDecodeError):
        raise FieldError("query.cursor", NOT_A_CURSOR) from None
    if made_for != listing:
        raise FieldError("query.cursor", OTHER_LISTING)
    return position
