"""Payout states and topics, mirrored by the `payouts_status_valid` CHECK (0015)."""

from __future__ import annotations

from enum import StrEnum

TOPIC_PAYOUT_NOTIFICATION = "notification.payout"


class PayoutStatus(StrEnum):
    """held -> signed -> sent -> confirmed | failed (signed -> confirmed|failed too)."""

    HELD = "held"  # funds held; waiting for a nonce (and for hot-wallet funds)
    SIGNED = "signed"  # nonce allocated, raw tx stored; broadcast not yet acknowledged
    SENT = "sent"  # the node accepted a raw tx of this payout at least once
    CONFIRMED = "confirmed"  # final with status 1: debit + withdrawal_fee posted
    FAILED = "failed"  # final with status 0 (reverted): hold released, nonce consumed


OPEN_STATUSES = (PayoutStatus.SIGNED.value, PayoutStatus.SENT.value)


def withdrawal_event_id(payout_id: object) -> str:
    """The payment event of a payout's debit (`po:<uuid>`)."""
    return f"po:{payout_id}"


def fee_event_id(payout_id: object) -> str:
    """The payment event of a payout's `withdrawal_fee` (`pofee:<uuid>`)."""
    return f"pofee:{payout_id}"
