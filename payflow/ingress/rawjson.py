"""Decoding a signed provider body, and making any decoded value safe to store.

A provider may send anything JSON can express: NUL characters, lone surrogates,
integers wider than 64 bits, numbers like `1e999`. PostgreSQL TEXT and JSONB refuse
NUL, UTF-8 refuses lone surrogates and the JSONB codec refuses wide integers, so none
of them may reach a query as they are. `decode_body` accepts every JSON document;
`safe_text` and `safe_json` give a lossless-to-review, storable copy (the exact bytes
are kept separately, see `payflow.ingress.service`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from decimal import Decimal
from typing import Any

from payflow.wirejson import loads_exact

_UNSAFE_CHAR = re.compile(r"[\x00\ud800-\udfff]")
_MAX_INT_DIGITS = 4000  # below Python's int-from-string limit (4300)
_SAFE_INT = 2**63
MAX_DEPTH = 64  # nesting kept in stored copies; no provider payload comes close


class NotJson(ValueError):
    """The body is not a JSON document at all (bad syntax, invalid UTF-8, NaN literals)."""


def _refuse_constant(name: str) -> Any:
    raise NotJson(f"{name} is not JSON")


def _parse_int(text: str) -> int | Decimal:
    return int(text) if len(text) <= _MAX_INT_DIGITS else Decimal(text)


def decode_body(body: bytes) -> Any:
    """Decode a JSON document exactly as sent.

    orjson is the fast path; a document it refuses or would change (a lone surrogate
    escape, an integer beyond 64 bits, a number beyond a double such as `1e999`) is
    decoded by the standard library with non-integers as `Decimal` (never a float), see
    `payflow.wirejson.loads_exact`. Raises `NotJson` for bytes that are not UTF-8 JSON,
    including the non-standard `NaN`/`Infinity` literals and documents nested deeper
    than `payflow.wirejson.MAX_DEPTH` (1024) levels.
    """
    try:
        return loads_exact(
            body, parse_float=Decimal, parse_int=_parse_int, parse_constant=_refuse_constant
        )
    except ValueError as error:
        raise NotJson(str(error)[:200]) from None


def safe_text(value: str, limit: int | None = None) -> str:
    """`value` with NUL and lone surrogates written as `\\uXXXX` text, cut to `limit`.

    The result is valid UTF-8 and storable in TEXT; a clean string is returned as is.
    """
    if _UNSAFE_CHAR.search(value):
        value = _UNSAFE_CHAR.sub(lambda m: f"\\u{ord(m.group()):04x}", value)
    return value if limit is None else value[:limit]


def safe_json(value: Any, _depth: int = 0) -> Any:
    """A JSONB-storable copy: strings and keys through `safe_text`, integers beyond
    64 bits, `Decimal`s and non-finite floats as their decimal text, and anything nested
    deeper than `MAX_DEPTH` levels as a marker string (the exact bytes are kept apart).

    Deterministic, and bounded in recursion whatever the input's depth."""
    if _depth > MAX_DEPTH and isinstance(value, dict | list):
        return f"<nested deeper than {MAX_DEPTH} levels>"
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -_SAFE_INT <= value < _SAFE_INT else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {safe_text(str(key)): safe_json(item, _depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [safe_json(item, _depth + 1) for item in value]
    return safe_text(str(value))


def canonical_bytes(value: Any) -> bytes:
    """A deterministic ASCII serialisation of `safe_json(value)` (sorted keys, every odd
    character escaped), used to fingerprint and render content; equal JSON values give
    equal bytes. Content deeper than `MAX_DEPTH` levels is not told apart."""
    return json.dumps(
        safe_json(value), sort_keys=True, ensure_ascii=True, separators=(",", ":")
    ).encode("ascii")


def fingerprint(value: Any) -> str:
    """Lower-case hex SHA-256 of `canonical_bytes(value)`."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()
