"""An operator's raise of an open native payout's fee hold, for `payflow payouts resign
--raise-fee-hold`: the only way a payout may pay more gas than it held at creation.

The fee market can rise above what a payout held (its fee ceiling is `fee_hold / gas
limit`, `plan.fee_ceiling`); the node then refuses it (or never mines it) and, when later
nonces are allocated, it cannot be voided (the gap would block them) nor re-signed usefully
(same cap). Raising the hold moves more of the account's money under the payout's hold
with the ledger's own guarded statement (`place_hold`: refused when the available balance
does not cover it or the account is frozen), in the caller's transaction, together with
the new transaction and the audit row; the payout is then re-signed at its nonce offering
what the raised hold allows. The account is charged the gas actually paid (never above the
hold) at settlement, and the rest is released with the hold, as for every payout.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from payflow.chain.payouts.holds import SQL
from payflow.chain.payouts.signer import TxFees
from payflow.db import Connection
from payflow.errors import BadInput
from payflow.money import InvalidAmount, format_amount, parse_amount, to_base_units


class FeeHoldRefused(BadInput):
    """The fee hold cannot be raised (the message says why)."""


@dataclass(frozen=True, slots=True)
class RaisedHold:
    """A payout's fee hold before and after an operator's raise (the account's asset)."""

    before: Decimal
    after: Decimal
    added: Decimal

    def as_evidence(self) -> dict[str, str]:
        return {
            "before": format_amount(self.before),
            "after": format_amount(self.after),
            "added": format_amount(self.added),
        }


def parse_raise(raw: str, payout: Any) -> Decimal:
    """The `--raise-fee-hold` amount: a positive decimal string in the payout's asset with
    at most its decimals; `FeeHoldRefused` for a token payout (its gas is the hot wallet's
    ETH and its ceiling is `PAYOUT_MAX_FEE_PER_GAS_WEI` alone: raise that setting, then
    `resign`) or a bad amount."""
    if payout["contract"] is not None:
        raise FeeHoldRefused(
            "--raise-fee-hold: a token payout's gas is paid by the hot wallet and capped by"
            " PAYOUT_MAX_FEE_PER_GAS_WEI alone; raise that setting, then resign without it"
        )
    try:
        return parse_amount(raw, int(payout["decimals"]))
    except InvalidAmount as exc:
        raise FeeHoldRefused(f"--raise-fee-hold: {exc}") from None


async def raise_fee_hold(conn: Connection, payout: Any, added: Decimal) -> RaisedHold:
    """Hold `added` more of the account's money for `payout`'s fee, in the caller's
    transaction (the payout is locked by the caller): the account's hold rises through
    `place_hold` (one guarded statement: available >= added, account active), then the
    payout's `fee_hold`. `FeeHoldRefused` when the account cannot cover it or is frozen;
    nothing is changed then (the caller's transaction rolls back)."""
    placed = await conn.fetchrow(SQL["place_hold"], payout["account_id"], added)
    if placed is None:
        state = await conn.fetchrow(SQL["account_state"], payout["account_id"])
        if state is not None and state["status"] != "active":
            raise FeeHoldRefused(f"account {payout['account_id']} is frozen: no hold is raised")
        available = "unknown" if state is None else format_amount(state["balance"] - state["held"])
        raise FeeHoldRefused(
            f"the account's available balance ({available} {payout['asset']}) does not cover"
            f" a fee hold raised by {format_amount(added)}"
        )
    after = await conn.fetchval(SQL["raise_fee_hold"], payout["id"], added)
    assert after is not None  # locked and open: checked by the caller
    return RaisedHold(before=payout["fee_hold"], after=after, added=added)


def raised_fees(
    gas_limit: int, hold: RaisedHold, decimals: int, base_fee: int, latest: Any
) -> TxFees:
    """The fees of the re-signed transaction: max fee per gas = the raised hold / gas limit
    (so the gas paid never exceeds the hold); the tip takes all of it above twice the
    current base fee (the operator raised the hold to get it mined: a node's tip floor or
    a crowded mempool), at least the latest attempt's tip. `FeeHoldRefused` when the raise
    does not lift the ceiling 10% above the latest attempt (`latest`, a `payout_txs` row:
    nodes refuse a replacement at the same nonce below that)."""
    ceiling = to_base_units(hold.after, decimals) // max(gas_limit, 1)
    old_fee = int(latest["max_fee_per_gas"])
    if ceiling * 10 < old_fee * 11:
        raise FeeHoldRefused(
            f"--raise-fee-hold: the new ceiling ({ceiling} wei/gas) must be at least 10% above"
            f" the latest attempt's max fee ({old_fee} wei/gas); raise by more"
        )
    tip = min(ceiling, max(int(latest["max_priority_fee_per_gas"]), ceiling - 2 * base_fee))
    return TxFees(gas_limit, ceiling, tip)
