"""Amount parsing: round trips and every reject class, including the seed's boundaries."""

from __future__ import annotations

from decimal import Decimal

import asyncpg
import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from payflow.errors import AmountOutOfRange, BadInput, classify
from payflow.money import (
    MAX_BALANCE_EXCLUSIVE,
    MAX_SCALE,
    InvalidAmount,
    add,
    exact,
    format_amount,
    format_at_scale,
    from_base_units,
    multiply,
    negate,
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


# --- no stored amount can make a read fail --------------------------------------------


def _at_scale_18(units: int) -> Decimal:
    """Exactly `units * 10^-18`, built without any context."""
    return Decimal((0 if units >= 0 else 1, tuple(int(d) for d in str(abs(units))), -18))


# Every value a money column can hold: NUMERIC(78,18) balances (amounts, NUMERIC(38,18),
# are a subset), signed because ledger rows store debits as negative amounts.
column_values = st.builds(
    lambda units, sign: Decimal((sign, tuple(int(d) for d in str(units)), -MAX_SCALE)),
    st.integers(min_value=0, max_value=10**78 - 1),
    st.sampled_from([0, 1]),
)


@given(column_values, st.integers(min_value=0, max_value=MAX_SCALE))
@example(Decimal("10000000000"), 18)  # the named input: 10^10 ETH needed 29 digits
@example(_at_scale_18(10**78 - 1), 18)  # the largest balance
@example(_at_scale_18(-(10**38) + 1), 0)  # the most negative ledger amount
@example(Decimal("1E+59"), 0)
@example(Decimal("0E-18"), 2)
def test_every_column_value_renders_exactly_at_every_scale(value: Decimal, scale: int) -> None:
    text = format_at_scale(value, scale)
    assert "e" not in text.lower()
    whole, _, fraction = text.lstrip("-").partition(".")
    assert len(fraction) >= scale and whole.isdigit()
    assert Decimal(text) == value  # exact: nothing rounded, nothing hidden


def test_named_big_deposit_renders_at_eth_scale() -> None:
    assert format_at_scale(Decimal("10000000000"), 18) == "10000000000.000000000000000000"
    assert format_at_scale(Decimal("1E+10"), 18) == "10000000000.000000000000000000"
    assert format_at_scale(Decimal("1.5"), 2) == "1.50"
    assert format_at_scale(Decimal("1"), 2) == "1.00"
    assert format_at_scale(Decimal("-0.000001"), 6) == "-0.000001"
    assert format_at_scale(Decimal("0.001"), 2) == "0.001"  # finer than the scale: shown


def test_largest_balance_renders() -> None:
    largest = _at_scale_18(10**78 - 1)
    assert largest < MAX_BALANCE_EXCLUSIVE
    assert format_at_scale(largest, 18) == "9" * 60 + "." + "9" * 18
    assert format_at_scale(largest, 2) == "9" * 60 + "." + "9" * 18


def test_format_amount_keeps_all_38_digits() -> None:
    value = Decimal("12345678901234567890.123456789012345678")
    assert format_amount(value) == "12345678901234567890.123456789012345678"
    # The seed's renderer, normalize() in the default 28-digit context, rounded it.
    assert format(value.normalize(), "f") != format_amount(value)


def test_negate_is_exact_where_unary_minus_rounds() -> None:
    value = Decimal("12345678901234567890.123456789012345678")
    assert negate(value) == Decimal("-12345678901234567890.123456789012345678")
    assert -value != negate(value)  # Python's default context rounds unary minus


@given(
    st.integers(min_value=-(10**78) + 1, max_value=10**78 - 1),
    st.integers(min_value=-(10**78) + 1, max_value=10**78 - 1),
)
def test_add_is_exact_for_every_balance(a: int, b: int) -> None:
    assert add(_at_scale_18(a), _at_scale_18(b)) == _at_scale_18(a + b)
    assert negate(_at_scale_18(a)) == _at_scale_18(-a)
    assert multiply(_at_scale_18(a), 3) == _at_scale_18(3 * a)


def test_exact_context_refuses_to_round() -> None:
    with pytest.raises(ArithmeticError), exact():
        Decimal(1) / Decimal(3)
    with pytest.raises(InvalidAmount):
        add(Decimal("1e-1000000"), Decimal(1))


def test_from_base_units_never_rounds_long_values() -> None:
    units = int("9" * 120)
    assert to_base_units(from_base_units(units, 18), 18) == units


def test_numeric_overflow_is_classified_without_driver_text() -> None:
    error = classify(asyncpg.NumericValueOutOfRangeError("numeric field overflow DETAIL secret"))
    assert isinstance(error, AmountOutOfRange) and isinstance(error, BadInput)
    assert "secret" not in str(error)


def test_webhook_body_renders_every_amount_exactly() -> None:
    from uuid import uuid4

    from payflow.webhooks.sender import webhook_body

    row = {
        "id": uuid4(),
        "status": "succeeded",
        "amount": Decimal("99999999999999999999.999999999999999999"),
        "scale": 18,
        "currency": "ETH",
    }
    body = orjson.loads(webhook_body(row))  # type: ignore[arg-type]
    assert body["amount"] == "99999999999999999999.999999999999999999"
    assert (
        orjson.loads(webhook_body({**row, "amount": Decimal("1E+10"), "scale": 2}))[  # type: ignore[arg-type]
            "amount"
        ]
        == "10000000000.00"
    )
