"""Payout states, mirrored by the `payouts_status_valid` CHECK (0015); the payout topic
(named with every topic in `payflow.broker.topology`)."""

from __future__ import annotations

from enum import StrEnum

from payflow.broker.topology import TOPIC_PAYOUT_NOTIFICATION as TOPIC_PAYOUT_NOTIFICATION


class PayoutStatus(StrEnum):
    """held -> signed -> sent -> confirmed | failed (signed -> confirmed|failed too)."""

    HELD = "held"  # funds held; waiting for a nonce (and for hot-wallet funds)
    SIGNED = "signed"  # nonce allocated, raw tx stored; broadcast not yet acknowledged
    SENT = "sent"  # the node accepted a raw tx of this payout at least once
    CONFIRMED = "confirmed"  # final with status 1: debit + withdrawal_fee posted
    FAILED = "failed"  # final with status 0 (reverted): hold released, nonce consumed


class Stall(StrEnum):
    """Why an open (signed or sent) payout does not progress; `payouts_stall_valid` (0026, 0028)."""

    UNACCEPTED = "unaccepted"  # the node refuses its transaction
    UNMINED = "unmined"  # accepted, not mined past PAYOUT_STUCK_AFTER_S, at its fee ceiling
    NONCE_TAKEN = "nonce_taken"  # another signer's transaction consumed its nonce
    # a mined receipt moved the hot wallet's tokens otherwise than the payout (0028)
    TRANSFER_MISMATCH = "transfer_mismatch"


class PayoutAction(StrEnum):
    """An operator's action on a stalled payout; `payout_actions_action_valid` (0026, 0028)."""

    VOID = "void"  # failed, hold released, nothing charged: nothing of ours was mined
    RESIGN = "resign"  # a new transaction at a fresh nonce (or the same, unused one)
    SETTLE = "settle"  # a final transfer-mismatch receipt settled confirmed|failed (0028)


OPEN_STATUSES = (PayoutStatus.SIGNED.value, PayoutStatus.SENT.value)


def withdrawal_event_id(payout_id: object) -> str:
    """The payment event of a payout's debit (`po:<uuid>`)."""
    return f"po:{payout_id}"


def fee_event_id(payout_id: object) -> str:
    """The payment event of a payout's `withdrawal_fee` (`pofee:<uuid>`)."""
    return f"pofee:{payout_id}"
