"""JSON from outside parties, decoded with a nesting bound that does not depend on the
interpreter.

orjson refuses documents nested deeper than 1024 levels. The standard library's
decoder, which payflow uses where orjson is too strict (lone surrogates, integers
beyond 64 bits, exact decimals), recurses once per level and is bounded only by
`sys.getrecursionlimit()`. Importing eth-account raises that limit to 100,000 (py_ecc
sets it), so a 2 MB body of `[` would overflow the C stack and kill the process. Every
standard-library decode of outside bytes therefore goes through `stdlib_loads`, which
refuses documents deeper than `MAX_DEPTH` before decoding, and importing this module
makes sure the recursion limit has room for that depth.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import orjson

MAX_DEPTH = 1024  # orjson's own bound, so both decoders accept the same documents
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
# orjson turns an integer beyond 64 bits into a float, silently; a run of 19+ digits
# (anywhere, strings included: that only costs a slower decode) takes the exact path.
_WIDE_INTEGER = re.compile(rb"[0-9]{19}")
# Room for MAX_DEPTH levels on top of a deep call stack, so a document within the bound
# decodes in every process, with or without eth-account imported (a few MB of C stack
# at most, well inside the 8 MB a thread gets here).
_ROOM = 4 * MAX_DEPTH
if sys.getrecursionlimit() < _ROOM:
    sys.setrecursionlimit(_ROOM)


def nesting_depth(text: str) -> int:
    """The deepest array/object nesting in `text` (0 for a scalar), counting brackets
    outside string literals.

    For any prefix that a JSON parser accepts this is at least the depth the parser
    reaches, so bounding it bounds the parser's recursion. O(len(text)).
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for char in brackets:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


class DuplicateKey(ValueError):
    """An object names one key twice: decoders disagree on which value counts (most keep
    the last, some the first), so such a document is refused, never guessed at."""


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`object_pairs_hook` that builds a dict, refusing a key seen twice (`DuplicateKey`)."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(f"duplicate key {key[:64]!r} in an object")
            seen.add(key)
    return document


def _member_count(text: str) -> int:
    """Object members in a valid JSON text: its name separators outside string literals."""
    return _STRING.sub("", text).count(":")


def _key_count(value: Any) -> int:
    """Keys in every object of a decoded document (iterative: any depth)."""
    keys, pending = 0, [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            keys += len(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return keys


def stdlib_loads(data: bytes | str, **options: Any) -> Any:
    """`json.loads(data, **options)` for outside bytes, bounded in depth.

    Raises `json.JSONDecodeError` (a `ValueError`) for a document nested deeper than
    `MAX_DEPTH`, for one the interpreter's recursion limit refuses, and for any other
    `ValueError` of the decode (an integer literal longer than
    `sys.get_int_max_str_digits()`, 4,300 digits, or a hook's refusal), so every caller
    that answers "not JSON" for a decode error does so for these too (a web framework
    answers 400 "error parsing the body" to a bare `ValueError`); raises
    `UnicodeDecodeError` for bytes that are not UTF-8. Never `RecursionError`. An object
    that names a key twice is refused (`unique_object`) unless `options` bring their own
    `object_pairs_hook`.
    """
    options.setdefault("object_pairs_hook", unique_object)
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if nesting_depth(text) > MAX_DEPTH:
        raise json.JSONDecodeError(f"nested deeper than {MAX_DEPTH} levels", text[:64], 0)
    try:
        return json.loads(text, **options)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text[:64], 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError as error:
        raise json.JSONDecodeError(str(error)[:200], text[:64], 0) from error


def loads_exact(data: bytes, **options: Any) -> Any:
    """Decode outside JSON exactly: orjson when it gives the same values as the standard
    decoder, else `stdlib_loads(data, **options)`.

    orjson is used for bodies it accepts that hold no integer literal of 19+ digits
    (orjson would make a float of one beyond 64 bits). Everything else (lone surrogate
    escapes, wide integers, `NaN` where `options` allow it) goes to the depth-bounded
    standard decoder. A document with a key twice in one object goes there too, and is
    refused: orjson keeps the last value silently, so its keys are counted against the
    body's members. Raises `json.JSONDecodeError` or `UnicodeDecodeError` (both
    `ValueError`) for bytes that are not such a document; never `RecursionError`.
    """
    if _WIDE_INTEGER.search(data) is None:
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            if b":" not in data or _key_count(document) == _member_count(data.decode()):
                return document
    return stdlib_loads(data, **options)
