"""Movements between payflow's own accounts and operator adjustments (migration 0031).

Each is one balanced `ledger_transfers` posting written by a SECURITY DEFINER function in
the caller's transaction:

- `post_network_fee`: the gas a mined payout transaction paid (gasUsed x
  effectiveGasPrice, in the chain's native asset), network_fees -> custody, once per
  mined transaction (`<chain>:<tx hash>`);
- `post_reorg_shortfall`: the part of a reversed deposit its customer already spent,
  reorg_loss -> custody, so the custody account is restored by the whole amount;
- `post_reorg_recovery`: the same deposit mined again and re-credited, the loss taken
  back (custody -> reorg_loss);
- `adjust`: an operator's signed correction between an account and a system account of
  the same asset, with its audit row (`ledger_adjustments`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import asyncpg

from payflow.db import Connection
from payflow.ledger.states import SQL
from payflow.money import fraction_digits, from_base_units


async def post_network_fee(conn: Connection, chain: str, tx_hash: str, fee_wei: int) -> Decimal:
    """Post the gas `tx_hash` paid on `chain` (in base units of its native asset); the
    amount posted, 0 when there was none to post or it is posted already."""
    if fee_wei <= 0:
        return Decimal(0)
    native = await conn.fetchrow(SQL["chain_native_decimals"], chain)
    if native is None:
        raise ValueError(f"chain {chain!r} is not registered")
    amount = from_base_units(fee_wei, int(native["native_decimals"]))
    posted = await conn.fetchval(SQL["post_network_fee"], chain, tx_hash.lower(), amount)
    return amount if posted is not None else Decimal(0)


async def post_reorg_shortfall(
    conn: Connection, reference: str, transfer_id: str, amount: Decimal
) -> bool:
    """Post the shortfall of the reversed deposit `transfer_id`; False when posted already."""
    if amount <= 0:
        return False
    posted = await conn.fetchval(SQL["post_reorg_shortfall"], reference, transfer_id, amount)
    return posted is not None


async def post_reorg_recovery(
    conn: Connection, reference: str, transfer_id: str, amount: Decimal
) -> bool:
    """Take back the loss of the re-credited deposit `transfer_id` (its reversal's
    shortfall); False when posted already."""
    if amount <= 0:
        return False
    posted = await conn.fetchval(SQL["post_reorg_recovery"], reference, transfer_id, amount)
    return posted is not None


class AdjustmentRefused(Exception):
    """The adjustment was refused (nothing written): the message says why, in one line."""


@dataclass(frozen=True, slots=True)
class Adjustment:
    transfer_id: int
    reference: str
    account: str
    against: str
    asset: str
    amount: Decimal
    reason: str
    adjusted_by: str
    created: bool  # False: the reference was applied before (nothing new written)


_REFUSALS = (
    asyncpg.CheckViolationError,
    asyncpg.NoDataFoundError,
    asyncpg.InvalidParameterValueError,
    asyncpg.UniqueViolationError,
    asyncpg.NumericValueOutOfRangeError,
)


async def adjust(
    conn: Connection,
    account: str,
    amount: Decimal,
    *,
    against: str,
    reason: str,
    by: str,
    reference: str,
) -> Adjustment:
    """Post an operator adjustment in the caller's transaction: `amount` (signed) is the
    change of `account`'s balance on its normal side, the opposite leg on the system
    account `against`. Raises `AdjustmentRefused` with the database's reason."""
    if not amount.is_finite() or amount == 0:
        raise AdjustmentRefused("the amount must be a non-zero finite decimal")
    asset = await conn.fetchval(SQL["system_account_asset"], against)
    if asset is not None:
        scale = await conn.fetchval(SQL["asset_scale"], asset)
        if scale is not None and fraction_digits(amount) > scale:
            raise AdjustmentRefused(f"the amount has more than {scale} decimal places ({asset})")
    try:
        row = await conn.fetchrow(
            SQL["post_adjustment"], account, against, amount, reason, by, reference
        )
    except _REFUSALS as exc:
        raise AdjustmentRefused(str(exc).splitlines()[0]) from None
    assert row is not None
    audit = await conn.fetchrow(SQL["adjustment_by_transfer"], row["transfer_id"])
    assert audit is not None
    return Adjustment(
        transfer_id=int(row["transfer_id"]),
        reference=audit["reference"],
        account=str(audit["account_id"] or audit["ledger_account"]),
        against=audit["against"],
        asset=audit["asset"],
        amount=audit["amount"],
        reason=audit["reason"],
        adjusted_by=audit["adjusted_by"],
        created=bool(row["created"]),
    )
