"""Idempotent broadcast of a stored raw transaction, and the node's answers classified.

Sending the same raw bytes again is always safe: they carry the same nonce and hash.
"already known" (and its spellings) means the node has it: success. "nonce too low"
means a transaction with this nonce is mined; the caller looks for the receipt of one
of the payout's own hashes (only payflow signs for the hot wallet) before anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import structlog

from payflow.chain.rpc import RpcClient, RpcError, RpcUnavailable

log = structlog.get_logger("payflow.payouts")

_KNOWN = ("already known", "known transaction", "already imported", "already exists")
_NONCE_USED = ("nonce too low", "nonce has already been used", "invalid nonce")
_FUNDS = ("insufficient funds", "insufficient balance")
_UNDERPRICED = (
    "underpriced",
    "fee too low",
    "replacement transaction",
    "less than block base fee",
    "tip too low",
    "below minimum",
    "minimum needed",
)


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


@dataclass(frozen=True, slots=True)
class Answer:
    """The node's answer to one broadcast: the outcome and, when it refused, its words
    (at most 300 characters; a node's error text, never a key)."""

    outcome: Broadcast
    detail: str | None = None


async def broadcast_answer(rpc: RpcClient, raw: str, tx_hash: str) -> Answer:
    """`eth_sendRawTransaction(raw)`, never raising for the node's answer."""
    try:
        answer = await rpc.send_raw_transaction(raw)
    except RpcUnavailable as error:
        log.warning("payflow.payouts.broadcast_unavailable", tx_hash=tx_hash, error=str(error))
        return Answer(Broadcast.UNAVAILABLE, str(error)[:300])
    except RpcError as error:
        outcome = classify_rpc_error(error.message)
        if outcome is not Broadcast.ACCEPTED:
            log.warning(
                "payflow.payouts.broadcast_refused",
                tx_hash=tx_hash,
                outcome=outcome.value,
                error=error.message,
            )
            return Answer(outcome, error.message[:300])
        return Answer(outcome)
    if answer.lower() != tx_hash:
        log.error("payflow.payouts.hash_mismatch", tx_hash=tx_hash, node_hash=answer)
        return Answer(Broadcast.REJECTED, f"the node answered another hash {answer[:80]}")
    return Answer(Broadcast.ACCEPTED)


async def broadcast(rpc: RpcClient, raw: str, tx_hash: str) -> Broadcast:
    """`eth_sendRawTransaction(raw)`'s outcome alone (see `broadcast_answer`)."""
    return (await broadcast_answer(rpc, raw, tx_hash)).outcome
