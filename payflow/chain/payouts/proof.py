"""What a payout's receipt proves: a payout is confirmed only on the chain's word.

A status-1 receipt says the transaction did not revert, not that money moved: an ERC-20
may return `false` without reverting (allowed by the standard; some tokens do it for a
blocked recipient) and then nothing moved and no log was written. So:

- token payout: the receipt's only Transfer out of the hot wallet must be the registered
  contract's `Transfer(hot wallet -> recipient, units)` (exact topics, exact amount);
  with none the payout fails (nothing of ours moved); with any other (part, elsewhere,
  twice, logged by another contract) it is a mismatch: not settled, the hold kept, an
  operator alerted (`tracking.py`);
- native payout: the mined transaction must send exactly `units` wei from the hot wallet
  to the recipient (`eth_getTransactionByHash`).

Nothing moved settles as failed (hold released, gas charged).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from payflow.chain.rpc import RpcClient, hex_int
from payflow.money import to_base_units

TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


def _topic_address(address: str) -> str:
    """An address as an indexed log topic (32 bytes, lower-case hex)."""
    return "0x" + address.lower().removeprefix("0x").rjust(64, "0")


class Proof(StrEnum):
    """What a status-1 receipt shows about the payout's transfer."""

    PROVEN = "proven"  # exactly the payout moved: confirm
    NOTHING_MOVED = "nothing_moved"  # nothing of the hot wallet moved: fail, release
    MISMATCH = "transfer_mismatch"  # the hot wallet's tokens moved otherwise: operator


def _topic_to_address(topic: str) -> str:
    """An indexed address topic back to a 20-byte address (lower-case hex)."""
    return "0x" + topic.removeprefix("0x")[-40:]


def hot_wallet_transfers(payout: Any, receipt: dict[str, Any]) -> list[dict[str, Any]]:
    """Every live `Transfer` out of the payout's hot wallet in `receipt`, whichever contract
    logged it: `{"contract", "from", "to", "units"}` (addresses lower-case hex, `units` the
    token's base units as a decimal string: never a float), in log order."""
    return [
        {
            "contract": emitter,
            "from": str(payout["hot_wallet"]).lower(),
            "to": _topic_to_address(to),
            "units": str(units),
        }
        for emitter, to, units in _outflows(payout, receipt)
    ]


def describe_transfers(transfers: list[dict[str, Any]]) -> str:
    """One line per the stall's `stall_detail`: what the receipt moved out of the wallet."""
    moved = "; ".join(
        f"contract {t['contract']} from {t['from']} to {t['to']} units {t['units']}"
        for t in transfers
    )
    return f"the receipt moved the hot wallet's tokens otherwise than the payout: {moved}"


def _outflows(payout: Any, receipt: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(emitter, recipient topic, amount) of every live `Transfer` log in `receipt` whose
    sender is the payout's hot wallet, whichever contract logged it."""
    sender = _topic_address(payout["hot_wallet"])
    found = []
    for entry in receipt.get("logs") or []:
        topics = [str(t).lower() for t in entry.get("topics") or []]
        if len(topics) != 3 or topics[0] != TRANSFER_TOPIC or topics[1] != sender:
            continue
        if entry.get("removed"):
            continue
        emitter = str(entry.get("address", "")).lower()
        found.append((emitter, topics[2], hex_int(entry.get("data") or "0x0") or 0))
    return found


def token_transfer_proof(payout: Any, receipt: dict[str, Any]) -> Proof:
    """`PROVEN` when the only Transfer out of the hot wallet in `receipt` is the payout
    contract's Transfer(hot wallet -> to, units); `NOTHING_MOVED` when there is none (a
    token that returned false; a Transfer from someone else proves nothing); `MISMATCH`
    for anything else the hot wallet's tokens did: part to the recipient, some or all
    elsewhere, more than once, or logged by another contract than the registered one.
    A mismatch is neither confirmed (it is not the payout) nor failed (releasing the hold
    would let the account spend what left): it stays open for an operator."""
    units = to_base_units(payout["amount"], int(payout["decimals"]))
    outflows = _outflows(payout, receipt)
    if not outflows:
        return Proof.NOTHING_MOVED
    if outflows == [(payout["contract"], _topic_address(payout["to_address"]), units)]:
        return Proof.PROVEN
    return Proof.MISMATCH


def token_transfer_proven(payout: Any, receipt: dict[str, Any]) -> bool:
    """True when `receipt` proves exactly the payout's token transfer (`token_transfer_proof`)."""
    return token_transfer_proof(payout, receipt) is Proof.PROVEN


def native_transfer_proven(payout: Any, tx: dict[str, Any] | None) -> bool:
    """True when the mined transaction `tx` sends exactly the payout's wei to its address
    from its hot wallet."""
    if tx is None:
        return False
    units = to_base_units(payout["amount"], int(payout["decimals"]))
    return (
        str(tx.get("to") or "").lower() == payout["to_address"]
        and str(tx.get("from") or "").lower() == payout["hot_wallet"]
        and hex_int(tx.get("value")) == units
    )


async def receipt_proof(rpc: RpcClient, payout: Any, receipt: dict[str, Any]) -> Proof:
    """What a `receipt` of one of the payout's transactions proves (module docstring).
    A reverted receipt moved nothing."""
    if (hex_int(receipt.get("status")) or 0) != 1:
        return Proof.NOTHING_MOVED
    if payout["contract"] is not None:
        return token_transfer_proof(payout, receipt)
    tx = await rpc.call("eth_getTransactionByHash", receipt["transactionHash"])
    return Proof.PROVEN if native_transfer_proven(payout, tx) else Proof.NOTHING_MOVED
