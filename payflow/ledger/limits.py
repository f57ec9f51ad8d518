"""Per-asset limits: the largest single payment, withdrawal and deposit payflow accepts.

The limits live on `assets` (`max_payment`, `max_withdrawal`, `max_deposit`, migration
0008) and sit far below the amount column's range (10^20), while balances are
NUMERIC(78,18): a credit that passed its limit can always post. An operator changes
them with `payflow assets set-limit`; the edges (`POST /api/v1/payments`,
`POST /api/v1/accounts/{id}/withdrawals`, provider deposits) call `check_limit` or the
pure `ensure_within`. Callers own the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

import asyncpg

from payflow.db import Connection
from payflow.errors import BadInput, NotFound
from payflow.ledger.states import SQL
from payflow.money import format_at_scale, parse_amount


class LimitKind(StrEnum):
    """Which operation a limit bounds; the column is `max_<kind>`."""

    PAYMENT = "payment"
    WITHDRAWAL = "withdrawal"
    DEPOSIT = "deposit"

    @property
    def column(self) -> str:
        return f"max_{self.value}"


@dataclass(frozen=True, slots=True)
class AssetLimits:
    """One asset's scale and maxima (each a positive `Decimal` in the asset's units)."""

    asset: str
    scale: int
    max_payment: Decimal
    max_withdrawal: Decimal
    max_deposit: Decimal

    def limit_for(self, kind: LimitKind) -> Decimal:
        """The largest single amount of `kind` accepted for this asset (inclusive)."""
        limit: Decimal = getattr(self, kind.column)
        return limit


class LimitExceeded(BadInput):
    """An amount above its asset's configured maximum for the operation.

    The message names the limit (`max_payment` ...), the asset and both amounts, e.g.
    "amount 2000000000.00 RUB exceeds max_payment of RUB (1000000000.00)".
    `field` (when the caller passes one, such as `body.amount`) lets the API name the
    offending field in its 422 problem document.
    """

    def __init__(
        self, limits: AssetLimits, kind: LimitKind, amount: Decimal, field: str | None = None
    ) -> None:
        self.asset = limits.asset
        self.kind = kind
        self.limit = limits.limit_for(kind)
        self.amount = amount
        self.field = field
        self.message = (
            f"amount {format_at_scale(amount, limits.scale)} {limits.asset} exceeds "
            f"{kind.column} of {limits.asset} ({format_at_scale(self.limit, limits.scale)})"
        )
        super().__init__(f"{field}: {self.message}" if field else self.message)


def limits_from_row(row: asyncpg.Record) -> AssetLimits:
    """An `AssetLimits` from a row with `code, scale, max_payment, max_withdrawal, max_deposit`."""
    return AssetLimits(
        asset=row["code"],
        scale=row["scale"],
        max_payment=row["max_payment"],
        max_withdrawal=row["max_withdrawal"],
        max_deposit=row["max_deposit"],
    )


async def asset_limits(conn: Connection, asset: str) -> AssetLimits:
    """The limits of one asset; `NotFound` when the asset is not configured."""
    row = await conn.fetchrow(SQL["asset_limits"], asset)
    if row is None:
        raise NotFound(f"unknown asset {asset!r}")
    return limits_from_row(row)


async def all_limits(conn: Connection) -> list[AssetLimits]:
    """Every configured asset with its limits, ordered by code."""
    return [limits_from_row(row) for row in await conn.fetch(SQL["all_asset_limits"])]


def ensure_within(
    limits: AssetLimits, kind: LimitKind, amount: Decimal, *, field: str | None = None
) -> None:
    """Pure check: `LimitExceeded` when `amount > limits.limit_for(kind)` (the limit
    itself is accepted)."""
    if amount > limits.limit_for(kind):
        raise LimitExceeded(limits, kind, amount, field)


async def check_limit(
    conn: Connection, asset: str, kind: LimitKind, amount: Decimal, *, field: str | None = None
) -> None:
    """Refuse `amount` of `asset` above the asset's maximum for `kind`.

    Raises `LimitExceeded` (a `BadInput`: 422 at the API) naming the limit and the
    asset, or `NotFound` for an unconfigured asset. Reads one `assets` row in the
    caller's transaction.
    """
    ensure_within(await asset_limits(conn, asset), kind, amount, field=field)


async def set_limits(
    conn: Connection,
    asset: str,
    *,
    payment: str | None = None,
    withdrawal: str | None = None,
    deposit: str | None = None,
) -> AssetLimits:
    """Change some of an asset's maxima (decimal strings); the others keep their values.

    Each new limit is parsed like an amount at the asset's scale (positive, below
    10^20, no finer than the scale): `InvalidAmount` names the offending option,
    `NotFound` an unknown asset. Returns the limits as stored.
    """
    current = await asset_limits(conn, asset)
    values: dict[str, Decimal | None] = {}
    for name, raw in (("payment", payment), ("withdrawal", withdrawal), ("deposit", deposit)):
        try:
            values[name] = None if raw is None else parse_amount(raw, current.scale)
        except BadInput as error:
            raise type(error)(f"--{name}: {error}") from None
    row = await conn.fetchrow(
        SQL["set_asset_limits"], asset, values["payment"], values["withdrawal"], values["deposit"]
    )
    assert row is not None  # asset_limits found the row and assets are never deleted
    return limits_from_row(row)
