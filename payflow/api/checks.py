"""Checks on what a client sends that a JSON schema alone cannot express: amounts as
decimal strings (never JSON numbers), text PostgreSQL can store, `metadata` that is
stored unchanged, and timestamp filters within range. The models in
`payflow.api.schemas` and the payment routes call them; each raises `ValueError` with
the message the client reads in the 422 problem.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any
from uuid import UUID

from pydantic import BeforeValidator

from payflow.text import unsafe_text_reason
from payflow.wirejson import stdlib_loads

AMOUNT_FIELD_PATTERN = r"^[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$"  # as money.AMOUNT_PATTERN
AMOUNT_EXAMPLE = "10.00"


DECIMAL_INTEGER = re.compile(r"-?[0-9]+", re.ASCII)


def decimal_integer_text(value: object) -> object:
    """A query or path integer as plain decimal digits (an optional leading minus, which
    the range check then answers). Pydantic's lax `int` reads `5_0` as 50, `5.0` and
    ` 5` as 5, `+5` as 5 and Arabic-Indic or fullwidth digits as numbers: none of those is
    what a client meant to send, so each is a 422 naming the parameter."""
    if isinstance(value, str) and not DECIMAL_INTEGER.fullmatch(value):
        raise ValueError("must be a whole number written in decimal digits, such as 20")
    return value


CANONICAL_UUID = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII | re.IGNORECASE
)


def canonical_uuid_text(value: object) -> object:
    """An id as the canonical hyphenated 8-4-4-4-12 form only (either case). Python's
    `UUID` also reads `{…}` braces, 32 bare hex digits and `urn:uuid:…`; payflow never
    writes those, so each is a 422 naming the field, never a lookup that answers 404."""
    if isinstance(value, str) and not CANONICAL_UUID.fullmatch(value):
        raise ValueError(
            "must be a UUID in its hyphenated form, such as 0b1e4c2a-7d3f-4a5b-9c6d-1e2f3a4b5c6d"
        )
    return value


# Every uuid path, query and body parameter of the API is this type
# (tests/integration/api/test_uuid_parameters.py walks /openapi.json for it).
Uuid = Annotated[UUID, BeforeValidator(canonical_uuid_text)]


def query_bool_text(value: object) -> object:
    """A boolean query parameter as `true` or `false` only: pydantic's lax `bool` reads
    "yes", "on", "1", "off" and "0" too, so a mistyped flag would silently mean something."""
    if isinstance(value, str) and value not in ("true", "false"):
        raise ValueError("must be true or false")
    return value


# Every boolean query parameter of the API is this type
# (tests/integration/api/test_boolean_parameters.py walks /openapi.json for it).
QueryBool = Annotated[bool, BeforeValidator(query_bool_text)]


def amount_must_be_string(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError('amount must be a decimal string such as "10.00", not a JSON boolean')
    if isinstance(value, int | float):
        raise ValueError('amount must be a decimal string such as "10.00", not a JSON number')
    return value


def clean_text(value: str) -> str:
    """Refuse text PostgreSQL cannot store (NUL) or UTF-8 cannot encode (lone surrogates)."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text") from None
    return value


def free_text(value: str) -> str:
    """Free text a merchant names (a payment's description): storable (`clean_text`) and
    without control characters or bidi overrides and isolates (`payflow.text`)."""
    clean_text(value)
    reason = unsafe_text_reason(value, multiline=True)
    if reason is not None:
        raise ValueError(reason)
    return value


INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1  # the integers orjson (and so payflow) stores
NUMBER_ADVICE = "; send such a value as a string"
# Floats at or above this magnitude are JSON-encoded with an exponent and stored by jsonb
# as integer literals (every float above 2^53 is integral).
FLOAT_AS_INT_FROM = 1e16
MAX_METADATA_DEPTH = 64  # objects and arrays inside `metadata`, well within orjson's 254


def check_metadata(value: Any) -> bool:
    """Refuse what metadata could not store unchanged; True when it holds a float.

    Walks nested objects and arrays without recursion. Raises `ValueError` for a
    non-finite number (`1e999`, `-1e999`, `NaN`, `Infinity`: JSON has no such values and
    they would be stored as null), an integer outside 64 bits (orjson cannot encode
    it), a float negative zero (`-0.0`: `jsonb` stores it as `0.0`), a float from 1e16
    within the 64-bit integer range (stored and read back as an integer), text with NUL
    (PostgreSQL `jsonb` cannot hold it) and nesting deeper than `MAX_METADATA_DEPTH`.
    Whether a finite float is the number the client wrote is
    decided by `floats_round_trip` on the raw body.
    """
    has_float = False
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise ValueError("text in metadata must not contain NUL characters")
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError("numbers in metadata must be finite" + NUMBER_ADVICE)
            if item == 0 and math.copysign(1.0, item) < 0:
                # jsonb has no negative zero: -0.0 would be stored as 0.0, and a retry of
                # the same request after the key's retention would then read as different.
                raise ValueError("numbers in metadata must not be -0.0" + NUMBER_ADVICE)
            if abs(item) >= FLOAT_AS_INT_FROM and INT64_MIN <= item <= UINT64_MAX:
                # Written with an exponent ("1e+16"), stored by jsonb as the integer
                # 10000000000000000 and read back as one: the float would come back an int.
                raise ValueError(
                    "a float from 1e16 up to 64-bit integers in metadata would be stored as"
                    " an integer; send an integer or a string"
                )
            has_float = True
        elif isinstance(item, int):
            if not INT64_MIN <= item <= UINT64_MAX:
                raise ValueError("integers in metadata must fit in 64 bits" + NUMBER_ADVICE)
        elif isinstance(item, dict | list):
            if depth >= MAX_METADATA_DEPTH:
                raise ValueError(f"metadata must nest at most {MAX_METADATA_DEPTH} levels deep")
            if isinstance(item, dict):
                pending.extend((key, depth) for key in item)
                pending.extend((child, depth + 1) for child in item.values())
            else:
                pending.extend((child, depth + 1) for child in item)
        else:
            raise ValueError(f"metadata cannot hold a {type(item).__name__}")
    return has_float


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


def floats_round_trip(raw_body: bytes) -> bool:
    """True when every decimal literal under the body's `metadata` survives as a float.

    A literal such as `0.10000000000000000001` or `1e-400` parses to a float that is a
    different number (`0.1`, `0.0`), which payflow would store silently changed; the
    raw text, read with exact decimals, is compared with the float it became.
    """
    try:
        document = stdlib_loads(raw_body, parse_float=Decimal, parse_constant=_refuse_constant)
    except ValueError:
        return False
    pending = [document.get("metadata") if isinstance(document, dict) else None]
    while pending:
        value = pending.pop()
        if isinstance(value, Decimal):
            as_float = float(value)
            if not math.isfinite(as_float) or Decimal(repr(as_float)) != value:
                return False
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return True


def utc_bound(value: datetime | None) -> datetime | None:
    """A timestamp filter converted to UTC; out-of-range instants are invalid, not a 500."""
    if value is None:
        return None
    try:
        converted = value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError("timestamp is out of range") from None
    if not 1970 <= converted.year <= 9998:
        raise ValueError("timestamp must fall between years 1970 and 9998")
    return converted


RFC3339_START = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ]")


def rfc3339_text(value: object) -> object:
    """Refuse a timestamp filter that is not written as RFC 3339 (`2026-12-02T10:00:00Z`):
    pydantic would read `0` or `99999999999` as seconds since the epoch, which a client
    never meant as a date. Anything else is left to the field's own parsing."""
    if isinstance(value, str) and not RFC3339_START.match(value):
        raise ValueError(
            "must be an RFC 3339 timestamp with an offset, such as 2026-12-02T10:00:00Z"
        )
    return value
