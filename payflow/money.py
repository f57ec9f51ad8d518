"""Amounts: the only parser for money from outside, the one exact decimal context, and
the one renderer of amounts for every wire (API, webhooks, CLI, recon, benches).

A float never touches an amount. Amounts travel as strings and live as `Decimal`.

Two rules keep every amount exact:

- Arithmetic on amounts runs in `EXACT` (via `add`, `negate`, `multiply` or
  `with exact():`). Its precision is far above any column's and it *traps* `Inexact`:
  a result that would need rounding raises instead of silently changing a value.
  Python's default context (28 digits, rounding) never sees an amount; even unary
  minus rounds there, so `-amount` is not written outside this module.
- Rendering (`format_at_scale`, `format_amount`) works on the digits and exponent of
  the `Decimal` itself and uses no context at all, so no stored value can make it fail.

Column widths (migration 0008): amounts are NUMERIC(38,18) (below 10^20, 18 decimals);
balances are NUMERIC(78,18) (below 10^60), so no sequence of accepted amounts can
overflow a balance in practice.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import (
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DecimalException,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
    localcontext,
)

from payflow.errors import BadInput

AMOUNT_PATTERN = re.compile(r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?", re.ASCII)
MAX_AMOUNT_TEXT_LENGTH = 64
MAX_SCALE = 18  # the fraction digits of every money column; assets.scale is 0..18
AMOUNT_DIGITS = 38  # NUMERIC(38,18): payment, event and ledger amounts
BALANCE_DIGITS = 78  # NUMERIC(78,18): accounts.balance, initial_balance, balance_after
MAX_AMOUNT_EXCLUSIVE = Decimal(10) ** (AMOUNT_DIGITS - MAX_SCALE)  # 10^20
MAX_BALANCE_EXCLUSIVE = Decimal(10) ** (BALANCE_DIGITS - MAX_SCALE)  # 10^60

# The one exact context: 200 significant digits hold any sum of balances many times
# over, and rounding is an error (Inexact is trapped), never a silent change.
EXACT = Context(
    prec=200,
    rounding=ROUND_HALF_EVEN,
    Emax=10**6,
    Emin=-(10**6),
    traps=[InvalidOperation, DivisionByZero, Overflow, Inexact],
)

ASSET_SCALES: dict[str, int] = {
    "ETH": 18,
    "USDC": 6,
    "USDT": 6,
    "WBTC": 8,
    "DAI": 18,
    "RUB": 2,
    "USD": 2,
    "EUR": 2,
}


class InvalidAmount(BadInput):
    """An amount that is not a positive decimal string within bounds and scale, or
    arithmetic on amounts that cannot be done exactly."""


@contextmanager
def exact() -> Iterator[Context]:
    """`with exact():` runs the block in `EXACT`; a rounding result raises `Inexact`."""
    with localcontext(EXACT) as context:
        yield context


def fraction_digits(value: Decimal) -> int:
    """The number of significant fraction digits of a finite `value` (0 for integers).

    Computed from the digits and exponent, without a context: `1.500` has 1, `1e2` 0.
    """
    _, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise InvalidAmount("amount must be finite")
    trailing = len(digits) - len("".join(map(str, digits)).rstrip("0"))
    if trailing == len(digits):  # zero
        return 0
    return max(0, -(exponent + trailing))


def parse_amount(raw: object, scale: int) -> Decimal:
    """Parse an amount string into a positive `Decimal` with at most `scale` decimals.

    Invariant: the result is finite, 0 < result < 10**20, and has no more than
    `scale` significant fraction digits. Anything else raises `InvalidAmount`.
    """
    if not isinstance(raw, str):
        raise InvalidAmount("amount must be a decimal string, not a JSON number or other type")
    if len(raw) > MAX_AMOUNT_TEXT_LENGTH:
        raise InvalidAmount("amount string is too long")
    if AMOUNT_PATTERN.fullmatch(raw) is None:
        raise InvalidAmount("amount must match ^[0-9]+(\\.[0-9]+)?([eE][+-]?[0-9]+)?$")
    try:
        value = Decimal(raw)  # construction from a string is exact and context-free
    except (InvalidOperation, ValueError):
        raise InvalidAmount("amount is not a number") from None
    if not value.is_finite():
        raise InvalidAmount("amount must be finite")
    if value <= 0:
        raise InvalidAmount("amount must be greater than zero")
    if value >= MAX_AMOUNT_EXCLUSIVE:
        raise InvalidAmount("amount must be less than 10^20")
    if fraction_digits(value) > scale:
        raise InvalidAmount(f"amount has more than {scale} decimal places")
    return value


def scale_of(asset: str) -> int:
    """The number of decimals `asset` allows; `BadInput` for an unknown asset."""
    try:
        return ASSET_SCALES[asset]
    except KeyError:
        raise BadInput(f"unknown asset {asset!r}") from None


def add(*amounts: Decimal) -> Decimal:
    """The exact sum of `amounts` (0 for none); `InvalidAmount` if it cannot be exact."""
    try:
        with exact():
            total = Decimal(0)
            for amount in amounts:
                total = total + amount
            return total
    except DecimalException as error:
        raise InvalidAmount(f"sum cannot be computed exactly ({type(error).__name__})") from None


def negate(amount: Decimal) -> Decimal:
    """`-amount`, exactly (unary minus rounds in Python's default context)."""
    try:
        with exact():
            return -amount
    except DecimalException as error:
        raise InvalidAmount(f"cannot negate exactly ({type(error).__name__})") from None


def multiply(amount: Decimal, count: int) -> Decimal:
    """`amount * count` for an integer `count`, exactly."""
    try:
        with exact():
            return amount * Decimal(count)
    except DecimalException as error:
        raise InvalidAmount(f"product cannot be exact ({type(error).__name__})") from None


def _units_at(digits: tuple[int, ...], exponent: int, places: int) -> int:
    """The integer `digits * 10**exponent * 10**places`; exact when the value has at most
    `places` significant decimals (the dropped digits are trailing zeros)."""
    coefficient = int("".join(map(str, digits)) or "0")
    shift = exponent + places
    factor: int = 10 ** abs(shift)
    return coefficient * factor if shift >= 0 else coefficient // factor


def from_base_units(units: int, decimals: int) -> Decimal:
    """Convert an integer count of base units (wei, satoshi) to an exact `Decimal`.

    Invariant: `to_base_units(from_base_units(u, d), d) == u` for every int `u >= 0`.
    Built from digits and exponent: no context, so no length of `units` can round.
    """
    if isinstance(units, bool) or not isinstance(units, int):
        raise InvalidAmount("base units must be an integer")
    if not 0 <= decimals <= 77:
        raise InvalidAmount("decimals must be between 0 and 77")
    if units < 0:
        raise InvalidAmount("base units must not be negative")
    return Decimal((0, tuple(int(d) for d in str(units)), -decimals))


def to_base_units(amount: Decimal, decimals: int) -> int:
    """Convert an amount to integer base units, refusing any loss of precision."""
    if fraction_digits(amount) > decimals:
        raise InvalidAmount(f"amount {format_amount(amount)} is finer than {decimals} decimals")
    sign, digits, exponent = amount.as_tuple()
    assert isinstance(exponent, int)  # fraction_digits refused non-finite values
    units = _units_at(digits, exponent, decimals)
    return -units if sign else units


def format_at_scale(amount: Decimal, scale: int) -> str:
    """Render `amount` in plain notation with at least `scale` fraction digits.

    `format_at_scale(Decimal("1E+10"), 18) == "10000000000.000000000000000000"`.
    Exact for every finite `Decimal`: it never rounds and never fails; a value with
    more significant decimals than `scale` keeps them all (nothing is hidden).
    Raises `InvalidAmount` only for NaN or infinity, which no column can hold.
    """
    if scale < 0:
        raise ValueError("scale must not be negative")
    sign, digits, exponent = amount.as_tuple()
    if not isinstance(exponent, int):
        raise InvalidAmount("amount must be finite")
    places = max(scale, fraction_digits(amount))
    units = _units_at(digits, exponent, places)
    text = str(units).rjust(places + 1, "0")
    whole, fraction = (text[:-places], text[-places:]) if places else (text, "")
    rendered = f"{whole}.{fraction}" if places else whole
    return f"-{rendered}" if sign and units else rendered


def format_amount(amount: Decimal) -> str:
    """Render an amount for the wire: plain notation, no exponent, no trailing zeros."""
    return format_at_scale(amount, 0)


def wire_amount(amount: Decimal, asset: str) -> str:
    """An amount as a string with exactly the asset's number of decimals.

    Rendered by `money.format_at_scale`, which is exact and context-free: no stored
    value (up to NUMERIC(78,18) balances) can make a read fail.
    An asset unknown to this build is shown plainly, without trailing zeros.
    """
    try:
        scale = scale_of(asset)
    except BadInput:
        return format_amount(amount)
    return format_at_scale(amount, scale)
