"""Verification of one claimed transfer against the node (no database).

A claim (recipient, contract or native, units, and a position inside the transaction
or only a provider's block-level log index) is confirmed only when the node's receipt
exists, succeeded (`status` 0x1) and contains exactly that transfer:
- native: the transaction's `to` is the recipient and its `value` the units;
- token: a `Transfer(address,address,uint256)` log emitted BY THE CLAIMED (registered)
  CONTRACT to the recipient with that amount. With a known position the log must sit
  there; otherwise the position is found by content (a provider's log index is
  block-level and moves when the transaction is re-included elsewhere), preferring the
  log whose block-level index equals the hint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from payflow.chain.finality import FinalityOracle
from payflow.chain.transfers import NATIVE_POSITION, TRANSFER_TOPIC, topic_address


@dataclass(frozen=True, slots=True)
class Truth:
    """The transfer as the node shows it, and where."""

    position: int
    to_address: str
    contract: str | None
    units: int
    block_number: int
    block_hash: str


class Missing:
    """The node knows no receipt for the transaction (not mined, dropped, or never)."""


MISSING = Missing()


def _transfer_log(log: dict[str, Any]) -> tuple[str, str, int] | None:
    """(contract, recipient, units) of a Transfer log, None for any other log."""
    topics = log.get("topics", [])
    if len(topics) != 3 or topics[0] != TRANSFER_TOPIC:
        return None
    try:
        units = int(str(log.get("data", "0x")), 16)
    except ValueError:
        return None
    return str(log["address"]), topic_address(topics[2]), units


async def verify_claim(
    oracle: FinalityOracle,
    chain: str,
    tx_hash: str,
    *,
    to_address: str,
    contract: str | None,
    units: int,
    position: int | None,
    log_index: int | None = None,
) -> Truth | Missing | str:
    """The node's `Truth` for the claim, `MISSING` (no receipt), or the refutation
    reason. Raises `ChainUnavailable` while the node cannot be asked."""
    receipt = await oracle.receipt(chain, tx_hash)
    if receipt is None or receipt.get("blockNumber") is None:
        return MISSING
    if receipt.get("status") != "0x1":
        return "the transaction failed (receipt status 0)"
    block = (int(receipt["blockNumber"]), str(receipt["blockHash"]))
    if contract is None:
        tx = await oracle.transaction(chain, tx_hash)
        if tx is None:
            return MISSING
        if tx.get("to") != to_address:
            return "another recipient: the transaction's value goes elsewhere"
        if int(tx["value"]) != units:
            return f"another amount: the transaction moved {tx['value']} base units"
        return Truth(NATIVE_POSITION, to_address, None, units, *block)
    logs: list[dict[str, Any]] = receipt.get("logs", [])
    if position is not None:
        if not 0 <= position < len(logs):
            return f"no log at position {position} in the transaction"
        found = _transfer_log(logs[position])
        if found is None:
            return f"the log at position {position} is not a Transfer"
        if found[0] != contract:
            return f"another contract: the Transfer comes from {found[0]}"
        if found[1] != to_address:
            return "another recipient"
        if found[2] != units:
            return f"another amount: the log moved {found[2]} base units"
        return Truth(position, to_address, contract, units, *block)
    matches = [
        index
        for index, log in enumerate(logs)
        if _transfer_log(log) == (contract, to_address, units)
    ]
    if matches:
        hinted = [
            i for i in matches if log_index is not None and logs[i].get("logIndex") == log_index
        ]
        return Truth((hinted or matches)[0], to_address, contract, units, *block)
    transfers = [t for t in (_transfer_log(log) for log in logs) if t is not None]
    if any(t[0] == contract and t[1] == to_address for t in transfers):
        return "another amount: the contract's Transfer to this address moved other units"
    if any(t[1] == to_address and t[2] == units for t in transfers):
        return "another contract: only an unregistered token moved this amount here"
    return "no such transfer in the transaction"
