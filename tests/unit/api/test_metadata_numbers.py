"""Payment metadata is stored exactly as sent or refused."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from payflow.api.checks import check_metadata, floats_round_trip


def _body(literal: str) -> bytes:
    return b'{"amount": "1", "metadata": {"a": [{"n": ' + literal.encode() + b"}]}}"


def _jsonb_keeps(value: float) -> bool:
    """jsonb gives the float back as a float: not -0.0 (stored 0.0), not an integral
    float from 1e16 within 64-bit integers (stored and read back as an integer)."""
    negative_zero = value == 0 and math.copysign(1.0, value) < 0
    as_integer = abs(value) >= 1e16 and -(2**63) <= value <= 2**64 - 1
    return not negative_zero and not as_integer


@given(st.floats(allow_nan=False, allow_infinity=False).filter(_jsonb_keeps))
def test_every_finite_float_as_written_by_a_json_encoder_is_accepted(value: float) -> None:
    assert floats_round_trip(_body(json.dumps(value)))
    assert check_metadata({"n": value}) is True


@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: not _jsonb_keeps(v)))
def test_every_float_jsonb_would_change_is_refused(value: float) -> None:
    with pytest.raises(ValueError):
        check_metadata({"n": [value]})


@pytest.mark.parametrize(
    "literal", ["0.10000000000000000001", "1e-400", "1e999", "-1e999", "2.0000000000000001"]
)
def test_literals_their_float_would_change_are_refused(literal: str) -> None:
    assert not floats_round_trip(_body(literal))


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 2**64, -(2**63) - 1, "a\x00"])
def test_values_metadata_cannot_hold_are_refused_anywhere(value: object) -> None:
    with pytest.raises(ValueError):
        check_metadata({"a": [{"b": value}]})
    with pytest.raises(ValueError):
        check_metadata({"nul\x00key": 1})


def test_integers_within_64_bits_and_plain_values_pass_without_float_check() -> None:
    assert check_metadata({"a": 2**64 - 1, "b": -(2**63), "c": [True, None, "x"]}) is False


def test_nesting_is_bounded_without_recursion() -> None:
    nested: object = 1
    for _ in range(63):
        nested = [nested]
    assert check_metadata({"a": nested}) is False
    for _ in range(10_000):
        nested = [nested]
    with pytest.raises(ValueError, match="nest"):
        check_metadata({"a": nested})
