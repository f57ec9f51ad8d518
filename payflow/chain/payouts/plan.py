"""Pure pieces of the engine: what a payout's transaction calls, the fee bump rule and
the per-run report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from payflow.chain.payouts.signer import TxFees, transfer_calldata
from payflow.config import PayoutSettings
from payflow.money import to_base_units


@dataclass(slots=True)
class TickReport:
    """What one pass did (counts)."""

    signed: int = 0
    sent: int = 0
    waiting: int = 0
    bumped: int = 0
    rebroadcast: int = 0
    confirmed: int = 0
    failed: int = 0
    stuck: int = 0
    stalled: int = 0
    errors: int = 0
    pending: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"signed={self.signed} sent={self.sent} waiting={self.waiting} bumped={self.bumped}"
            f" rebroadcast={self.rebroadcast} confirmed={self.confirmed} failed={self.failed}"
            f" stuck={self.stuck} stalled={self.stalled} errors={self.errors}"
        )


def payout_call(row: Any) -> tuple[str, int, str]:
    """(to, value in wei, calldata) of a payout: a plain transfer or ERC-20 `transfer`."""
    units = to_base_units(row["amount"], int(row["decimals"]))
    if row["contract"] is None:
        return row["to_address"], units, "0x"
    return row["contract"], 0, transfer_calldata(row["to_address"], units)


def _raised(old: int, percent: int) -> int:
    """`old` up by `percent` (rounded up), and at least by one wei."""
    return max(old + 1, -(-old * (100 + percent) // 100))


def fee_ceiling(settings: PayoutSettings, payout: Any, gas_limit: int) -> int:
    """The highest max fee per gas (wei) a transaction of `payout` may carry: never more
    than `PAYOUT_MAX_FEE_PER_GAS_WEI` now, and for a native payout never more than its own
    fee hold allows (`fee_hold` / gas limit): the hold was computed at the setting of its
    day, and raising the setting later must not let an older payout pay more gas than it
    held (that fee could never be settled). Token payouts pay gas in ETH from the hot
    wallet and charge the flat `PAYOUT_TOKEN_FEE` they held, so the setting alone caps them."""
    cap = settings.payout_max_fee_per_gas_wei
    if payout["contract"] is None:
        held_wei = to_base_units(payout["fee_hold"], int(payout["decimals"]))
        cap = min(cap, held_wei // max(gas_limit, 1))
    return cap


def capped_fees(fees: TxFees, ceiling: int) -> TxFees:
    """`fees` with the max fee (and the tip) no higher than `ceiling`."""
    max_fee = min(fees.max_fee_per_gas, ceiling)
    return TxFees(fees.gas_limit, max_fee, min(fees.max_priority_fee_per_gas, max_fee))


def bumped_fees(
    settings: PayoutSettings, latest: Any, current: TxFees, ceiling: int | None = None
) -> TxFees | None:
    """The fees of a replacement for the attempt `latest` (a `payout_txs` row), or None
    when the ceiling forbids one. Both fees rise by `PAYOUT_FEE_BUMP_PERCENT` (nodes
    require +10% on both), the max fee also covers `current` (2 x base fee + tip), and
    nothing passes `ceiling` (`fee_ceiling`: the payout's own hold and
    `PAYOUT_MAX_FEE_PER_GAS_WEI`; the setting alone when None)."""
    percent = settings.payout_fee_bump_percent
    old_fee, old_tip = int(latest["max_fee_per_gas"]), int(latest["max_priority_fee_per_gas"])
    tip = _raised(old_tip, percent)
    fee = min(
        settings.payout_max_fee_per_gas_wei if ceiling is None else ceiling,
        max(_raised(old_fee, percent), current.max_fee_per_gas + tip),
    )
    if fee < _raised(old_fee, 10) or tip > fee:
        return None
    return TxFees(int(latest["gas_limit"]), fee, tip)
