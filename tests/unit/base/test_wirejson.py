"""`payflow.wirejson`: the standard decoder's depth is bounded by payflow, not by the
interpreter's recursion limit (which eth-account's py_ecc raises to 100,000)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from payflow.wirejson import MAX_DEPTH, loads_exact, nesting_depth, stdlib_loads


@contextmanager
def recursion_limit(limit: int) -> Iterator[None]:
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_DOCS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\,:ab\x00'),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\x'), children, max_size=3)
    ),
    max_leaves=30,
)


@given(_DOCS)
def test_depth_counts_brackets_outside_strings_only(document: Any) -> None:
    text = json.dumps(document)
    assert nesting_depth(text) == _depth(document)
    assert stdlib_loads(text) == document


def test_the_bound_is_orjsons_bound() -> None:
    at_bound = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    beyond = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    orjson.loads(at_bound)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(beyond)
    with recursion_limit(100_000):  # as in a service process (py_ecc's value)
        assert _depth(stdlib_loads(at_bound)) == MAX_DEPTH
    with pytest.raises(json.JSONDecodeError, match="nested deeper than 1024"):
        stdlib_loads(beyond)


@pytest.mark.parametrize("limit", [300, 100_000])
def test_deep_documents_are_refused_whatever_the_recursion_limit(limit: int) -> None:
    # 100,000 is what importing eth-account sets; json.loads of this body would then
    # overflow the C stack and kill the process instead of raising.
    body = b"[" * 1_000_000 + b"]" * 1_000_000
    with recursion_limit(limit), pytest.raises(json.JSONDecodeError):
        stdlib_loads(body)


def test_a_low_recursion_limit_is_a_decode_error_not_a_recursion_error() -> None:
    with recursion_limit(300), pytest.raises(json.JSONDecodeError, match="too deeply"):
        stdlib_loads("[" * 600 + "]" * 600)


def test_an_unterminated_string_does_not_hide_brackets() -> None:
    assert nesting_depth('"abc' + "[" * 5) == 5
    assert nesting_depth(r'["\"[[[[", [1]]') == 2


def test_every_api_and_console_route_decodes_json_with_the_bound() -> None:
    from fastapi.routing import APIRoute

    from payflow.api.routing import BoundedJsonRoute
    from payflow.app import create_app
    from payflow.config import load_settings

    app = create_app(
        load_settings(api_key="k" * 16, provider_webhook_secret="s" * 32, console_enabled=True)
    )
    routes, pending = [], list(app.routes)
    while pending:  # FastAPI 0.165 keeps an included router whole (`original_router`)
        route = pending.pop()
        pending.extend(getattr(getattr(route, "original_router", None), "routes", []))
        if isinstance(route, APIRoute):
            routes.append(route)
    assert len(routes) >= 20
    assert [r.path for r in routes if not isinstance(r, BoundedJsonRoute)] == []


@pytest.mark.parametrize(
    "literal",
    [
        "18446744073709551615",  # u64 max: orjson keeps it
        "18446744073709551616",  # orjson would give a float
        "-9223372036854775809",
        "123456789012345678901234567890",
    ],
)
def test_wide_integers_keep_every_digit(literal: str) -> None:
    body = f'{{"n": {literal}, "list": [{literal}]}}'.encode()
    assert loads_exact(body) == {"n": int(literal), "list": [int(literal)]}


def test_orjson_path_and_standard_path_agree() -> None:
    body = b'{"a": 1.5, "b": [1, 2, {"c": null}], "d": "x"}'
    assert loads_exact(body) == json.loads(body)
    assert loads_exact(b'["\\ud800", 1.5]') == ["\ud800", 1.5]
    assert loads_exact(b"[NaN]")[0] != loads_exact(b"[NaN]")[0]  # the standard decoder's NaN
    with pytest.raises(json.JSONDecodeError):
        loads_exact(b'{"a": 1')


@pytest.mark.parametrize("digits", [4301, 5000, 60_000])
def test_an_integer_beyond_the_interpreters_digit_limit_is_a_decode_error(digits: int) -> None:
    # json.loads raises a bare ValueError ("Exceeds the limit (4300 digits) for integer
    # string conversion"), which FastAPI answered 400 "There was an error parsing the
    # body" with type about:blank, unlike every other body that is not JSON (422 body).
    body = b'{"metadata": {"n": ' + b"7" * digits + b"}}"
    with pytest.raises(json.JSONDecodeError):
        loads_exact(body)
    with pytest.raises(json.JSONDecodeError):
        stdlib_loads(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": 1, "a": 2}',
        b'{"a": 1, "a": 1}',
        b'{"x": {"k": "1", "k": "2"}}',
        b'[{"a": 1}, {"b": 1, "b": 2}]',
        b'{"a": 1, "\\u0061": 2}',
        b'{"a": "\\ud800", "a": 2}',  # the standard decoder's path
        b'{"n": 18446744073709551616, "n": 1}',  # a wide integer: the same path
    ],
)
def test_a_key_twice_in_one_object_is_refused(body: bytes) -> None:
    with pytest.raises(ValueError, match="duplicate key"):
        loads_exact(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": {"a": {"a": 1}}}',  # the same key at different levels
        b'[{"a": 1}, {"a": 2}]',  # in different objects
        b'{"a": "x:y", "b": ":::"}',  # colons inside strings
        b'{"a\\":": 1, "b": "\\"::"}',  # escaped quotes before colons
        b'[1, "2", null]',
        b'"a:b"',
    ],
)
def test_distinct_keys_decode_as_orjson_does(body: bytes) -> None:
    assert loads_exact(body) == orjson.loads(body)


@given(
    st.dictionaries(st.text(alphabet='ab:"\\{}[]'), st.integers(-(2**63), 2**63 - 1), max_size=6)
)
def test_any_object_with_distinct_keys_round_trips(document: dict[str, int]) -> None:
    body = orjson.dumps({"outer": document, "list": [document]})
    assert loads_exact(body) == {"outer": document, "list": [document]}
