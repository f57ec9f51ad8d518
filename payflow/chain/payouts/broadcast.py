"""Idempotent broadcast of a stored raw transaction, and the node's answers classified.

Sending the same raw bytes again is always safe: they carry the same nonce and hash.
"already known" (and its spellings) means the node has it: success. "nonce too low"
means a transaction with this nonce is mined; the caller looks for the receipt of one
of the payout's own hashes (only payflow signs for the hot wallet) before anything else.
"""

from __future__ import annotations

from enum import StrEnum

import structlog

from payflow.chain.rpc import RpcClient, RpcError, RpcUnavailable

log = structlog.get_logger("payflow.payouts")

_KNOWN = ("already known", "known transaction", "already imported", "already exists")
_NONCE_USED = ("nonce too low", "nonce has already been used", "invalid nonce")
_FUNDS = ("insufficient funds", "insufficient balance")
_UNDERPRICED = ("underpriced", "fee too low", "replacement transaction")


class Broadcast(StrEnum):
    """What the node said to one raw transaction."""

    ACCEPTED = "accepted"  # new to the node, or already known: it has it
    NONCE_USED = "nonce_used"  # a transaction with this nonce is mined (maybe ours)
    NO_FUNDS = "no_funds"  # the hot wallet cannot pay value + gas
    UNDERPRICED = "underpriced"  # a replacement whose fee is not high enough
    UNAVAILABLE = "unavailable"  # transport failure: try again later
    REJECTED = "rejected"  # anything else: logged, tried again later


def classify_rpc_error(message: str) -> Broadcast:
    """Map a node's error message to a `Broadcast` outcome (case-insensitive)."""
    text = message.lower()
    for needles, outcome in (
        (_KNOWN, Broadcast.ACCEPTED),
        (_NONCE_USED, Broadcast.NONCE_USED),
        (_FUNDS, Broadcast.NO_FUNDS),
        (_UNDERPRICED, Broadcast.UNDERPRICED),
    ):
        if any(needle in text for needle in needles):
            return outcome
    return Broadcast.REJECTED


async def broadcast(rpc: RpcClient, raw: str, tx_hash: str) -> Broadcast:
    """`eth_sendRawTransaction(raw)`, never raising for the node's answer."""
    try:
        answer = await rpc.send_raw_transaction(raw)
    except RpcUnavailable as error:
        log.warning("payflow.payouts.broadcast_unavailable", tx_hash=tx_hash, error=str(error))
        return Broadcast.UNAVAILABLE
    except RpcError as error:
        outcome = classify_rpc_error(error.message)
        if outcome is not Broadcast.ACCEPTED:
            log.warning(
                "payflow.payouts.broadcast_refused",
                tx_hash=tx_hash,
                outcome=outcome.value,
                error=error.message,
            )
        return outcome
    if answer.lower() != tx_hash:
        log.error("payflow.payouts.hash_mismatch", tx_hash=tx_hash, node_hash=answer)
        return Broadcast.REJECTED
    return Broadcast.ACCEPTED
