"""What a payout's receipt proves: a payout is confirmed only on the chain's word.

A status-1 receipt says the transaction did not revert, not that money moved: an ERC-20
may return `false` without reverting (allowed by the standard; some tokens do it for a
blocked recipient) and then nothing moved and no log was written. So:

- token payout: the receipt must hold the registered contract's
  `Transfer(hot wallet -> recipient, units)` log (exact topics, exact amount);
- native payout: the mined transaction must send exactly `units` wei from the hot wallet
  to the recipient (`eth_getTransactionByHash`).

Anything else is `proven=False` and settles as failed (hold released, gas charged).
"""

from __future__ import annotations

from typing import Any

from payflow.chain.rpc import RpcClient, hex_int
from payflow.money import to_base_units

TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


def _topic_address(address: str) -> str:
    """An address as an indexed log topic (32 bytes, lower-case hex)."""
    return "0x" + address.lower().removeprefix("0x").rjust(64, "0")


def token_transfer_proven(payout: Any, receipt: dict[str, Any]) -> bool:
    """True when `receipt` has the payout contract's Transfer(hot wallet -> to, units)."""
    units = to_base_units(payout["amount"], int(payout["decimals"]))
    want = [
        TRANSFER_TOPIC,
        _topic_address(payout["hot_wallet"]),
        _topic_address(payout["to_address"]),
    ]
    for entry in receipt.get("logs") or []:
        if str(entry.get("address", "")).lower() != payout["contract"]:
            continue
        topics = [str(t).lower() for t in entry.get("topics") or []]
        if topics != want:
            continue
        if hex_int(entry.get("data") or "0x0") == units and not entry.get("removed"):
            return True
    return False


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


async def receipt_proves(rpc: RpcClient, payout: Any, receipt: dict[str, Any]) -> bool:
    """Whether a status-1 `receipt` of one of the payout's transactions proves the
    payout's transfer (see the module docstring). A reverted receipt proves nothing."""
    if (hex_int(receipt.get("status")) or 0) != 1:
        return False
    if payout["contract"] is not None:
        return token_transfer_proven(payout, receipt)
    tx = await rpc.call("eth_getTransactionByHash", receipt["transactionHash"])
    return native_transfer_proven(payout, tx)
