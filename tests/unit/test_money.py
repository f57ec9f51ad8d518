"""Amount parsing: round trips and every reject class, including the seed's boundaries."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from payflow.money import (
    InvalidAmount,
    format_amount,
    from_base_units,
    parse_amount,
    to_base_units,
)

positive_amounts = st.decimals(
    min_value=Decimal("1e-18"),
    max_value=Decimal("99999999999999999999.999999999999999999"),
    places=18,
    allow_nan=False,
    allow_infinity=False,
).filter(lambda d: d > 0)


@given(positive_amounts)
def test_formatted_amount_parses_back_exactly(amount: Decimal) -> None:
    assert parse_amount(format_amount(amount), 18) == amount


@given(st.integers(min_value=0, max_value=10**40), st.integers(min_value=0, max_value=30))
def test_base_units_round_trip(units: int, decimals: int) -> None:
    assert to_base_units(from_base_units(units, decimals), decimals) == units


def test_base_units_are_exact_for_wei() -> None:
    assert from_base_units(1, 18) == Decimal("0.000000000000000001")
    assert from_base_units(123456789012345678901234567890, 18) == Decimal(
        "123456789012.345678901234567890"
    )


@pytest.mark.parametrize(
    "raw",
    [
        "99999999999999999999.999999999999999999",  # 10^20 - 10^-18
        "0.000000000000000001",  # 18 decimals
        "50.0000000000000000000",  # 19 written, 0 significant after normalize()
        "1e2",
        "1E-18",
        "007",
    ],
)
def test_accepts_valid_amounts(raw: str) -> None:
    assert parse_amount(raw, 18) > 0


def test_normalized_scale_counts_significant_decimals() -> None:
    assert parse_amount("50.0000000000000000000", 18) == Decimal(50)
    assert parse_amount("10.10", 2) == Decimal("10.10")


@pytest.mark.parametrize(
    "raw",
    [
        1,
        1.5,
        Decimal("1"),
        None,
        True,
        ["1"],
        "",
        " 1",
        "1 ",
        "+1",
        "-1",
        "1_000",
        "١٢",  # Arabic-Indic digits
        "\uff11",  # fullwidth digit
        "NaN",
        "Infinity",
        "inf",
        "0",
        "0.000",
        "0e5",
        "100000000000000000000",  # 10^20
        "1e20",
        "1e400",
        "0.0000000000000000001",  # 19 decimals
        "1e-19",
        "1.",
        ".5",
        "0x10",
        "1" * 65,
    ],
)
def test_rejects_invalid_amounts(raw: object) -> None:
    with pytest.raises(InvalidAmount):
        parse_amount(raw, 18)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_floats_are_always_rejected(value: float) -> None:
    with pytest.raises(InvalidAmount):
        parse_amount(value, 18)


@given(st.integers(min_value=-(10**30), max_value=0))
def test_zero_and_negatives_are_rejected(value: int) -> None:
    with pytest.raises(InvalidAmount):
        parse_amount(str(value), 18)


@given(st.integers(min_value=19, max_value=40))
def test_more_decimals_than_scale_are_rejected(places: int) -> None:
    with pytest.raises(InvalidAmount):
        parse_amount("1." + "0" * (places - 1) + "1", 18)


@given(st.integers(min_value=10**20, max_value=10**30))
def test_ten_to_the_twenty_and_above_are_rejected(value: int) -> None:
    with pytest.raises(InvalidAmount):
        parse_amount(str(value), 18)


@given(st.text(alphabet=st.characters(blacklist_characters="0123456789.eE"), min_size=1))
def test_foreign_characters_are_rejected(text: str) -> None:
    with pytest.raises(InvalidAmount):
        parse_amount("1" + text, 18)


def test_scale_two_rejects_cents_fractions() -> None:
    with pytest.raises(InvalidAmount):
        parse_amount("10.001", 2)


def test_to_base_units_refuses_precision_loss() -> None:
    with pytest.raises(InvalidAmount):
        to_base_units(Decimal("0.123"), 2)
