"""Amounts: the only parser for money coming from outside, and exact base-unit conversion.

A float never touches an amount. Amounts travel as strings and live as `Decimal`.
"""

from __future__ import annotations

import re
from decimal import Context, Decimal, InvalidOperation, localcontext

from payflow.errors import BadInput

AMOUNT_PATTERN = re.compile(r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?", re.ASCII)
MAX_AMOUNT_EXCLUSIVE = Decimal(10) ** 20
MAX_AMOUNT_TEXT_LENGTH = 64
# NUMERIC(38,18): 20 integer digits and 18 fraction digits, with room to spare.
EXACT = Context(prec=80, Emax=10**6, Emin=-(10**6))

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
    """An amount that is not a positive decimal string within bounds and scale."""


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
    with localcontext(EXACT):
        try:
            value = Decimal(raw)
        except InvalidOperation:
            raise InvalidAmount("amount is not a number") from None
        if not value.is_finite():
            raise InvalidAmount("amount must be finite")
        if value <= 0:
            raise InvalidAmount("amount must be greater than zero")
        if value >= MAX_AMOUNT_EXCLUSIVE:
            raise InvalidAmount("amount must be less than 10^20")
        exponent = value.normalize().as_tuple().exponent
        assert isinstance(exponent, int)  # finite values have an int exponent
        if -exponent > scale:
            raise InvalidAmount(f"amount has more than {scale} decimal places")
        return value


def scale_of(asset: str) -> int:
    """The number of decimals `asset` allows; `BadInput` for an unknown asset."""
    try:
        return ASSET_SCALES[asset]
    except KeyError:
        raise BadInput(f"unknown asset {asset!r}") from None


def from_base_units(units: int, decimals: int) -> Decimal:
    """Convert an integer count of base units (wei, satoshi) to an exact `Decimal`.

    Invariant: `to_base_units(from_base_units(u, d), d) == u` for every int `u >= 0`.
    """
    if isinstance(units, bool) or not isinstance(units, int):
        raise InvalidAmount("base units must be an integer")
    if not 0 <= decimals <= 77:
        raise InvalidAmount("decimals must be between 0 and 77")
    with localcontext(EXACT):
        return Decimal(units) / Decimal(10**decimals)


def to_base_units(amount: Decimal, decimals: int) -> int:
    """Convert an amount to integer base units, refusing any loss of precision."""
    with localcontext(EXACT):
        scaled = amount * Decimal(10**decimals)
        if scaled != scaled.to_integral_value():
            raise InvalidAmount(f"amount {amount} is finer than {decimals} decimals")
        return int(scaled)


def format_amount(amount: Decimal) -> str:
    """Render an amount for the wire: plain notation, no exponent, no trailing zeros."""
    with localcontext(EXACT):
        text = format(amount.normalize(), "f")
    return text
