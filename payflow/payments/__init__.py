"""Merchant payments (above webhooks and the ledger): creation with its idempotency
record, reads, the gateway, the charge-claim protocol, finalizing, the payment worker,
its dead letters and DLQ replayer, operator review.

The names other packages use; import them from here or from their module."""

from payflow.payments.dead_letters import PAYMENT_DEAD_LETTERER, PAYMENT_NOTE, dead_letter_payment
from payflow.payments.finalize import credit_event_id
from payflow.payments.gateway import EmulatedGateway, Gateway
from payflow.payments.jobs import JOBS
from payflow.payments.processor import PaymentProcessor
from payflow.payments.replay import replay_payment
from payflow.payments.review import print_review, resolve_cli
from payflow.payments.service import (
    CREATE_SCOPE,
    NewPayment,
    create_payment,
    get_payment,
    list_payments,
)

__all__ = [
    "CREATE_SCOPE",
    "JOBS",
    "PAYMENT_DEAD_LETTERER",
    "PAYMENT_NOTE",
    "EmulatedGateway",
    "Gateway",
    "NewPayment",
    "PaymentProcessor",
    "create_payment",
    "credit_event_id",
    "dead_letter_payment",
    "get_payment",
    "list_payments",
    "print_review",
    "replay_payment",
    "resolve_cli",
]
