"""Pure pieces of the engine: what a payout's transaction calls, the fee bump rule and
the per-run report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from payflow.chain.payouts.signer import TxFees, transfer_calldata
from payflow.config import Settings
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
    errors: int = 0
    pending: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"signed={self.signed} sent={self.sent} waiting={self.waiting} bumped={self.bumped}"
            f" rebroadcast={self.rebroadcast} confirmed={self.confirmed} failed={self.failed}"
            f" stuck={self.stuck} errors={self.errors}"
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


def bumped_fees(settings: Settings, latest: Any, current: TxFees) -> TxFees | None:
    """The fees of a replacement for the attempt `latest` (a `payout_txs` row), or None
    when the ceiling forbids one. Both fees rise by `PAYOUT_FEE_BUMP_PERCENT` (nodes
    require +10% on both), the max fee also covers `current` (2 x base fee + tip), and
    nothing passes `PAYOUT_MAX_FEE_PER_GAS_WEI`, the ceiling the hold was computed at."""
    percent = settings.payout_fee_bump_percent
    old_fee, old_tip = int(latest["max_fee_per_gas"]), int(latest["max_priority_fee_per_gas"])
    tip = _raised(old_tip, percent)
    fee = min(
        settings.payout_max_fee_per_gas_wei,
        max(_raised(old_fee, percent), current.max_fee_per_gas + tip),
    )
    if fee < _raised(old_fee, 10) or tip > fee:
        return None
    return TxFees(int(latest["gas_limit"]), fee, tip)
