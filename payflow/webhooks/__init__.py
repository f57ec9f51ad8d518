"""Merchant webhooks (above the ledger, below payments, which pass them what to send):
signing, the SSRF guard, the HTTP client, the sender, retry chains and dead letters,
the direct first send, the attempt log with its retention (`JOBS`).

The names other packages use; import them from here or from their module."""

from payflow.webhooks.attempts import attempts_of
from payflow.webhooks.chains import WEBHOOK_DEAD_LETTERER
from payflow.webhooks.client import WebhookClient, build_http_client
from payflow.webhooks.dead import replay_webhook
from payflow.webhooks.direct import DirectSends
from payflow.webhooks.event_retention import purge_merchant_events
from payflow.webhooks.events import (
    EventKind,
    MerchantEvent,
    event_body,
    get_event,
    list_events,
    record_event,
    rfc3339,
)
from payflow.webhooks.jobs import JOBS
from payflow.webhooks.sender import WebhookSender, dead_letter_webhook
from payflow.webhooks.ssrf import check_webhook_url

__all__ = [
    "JOBS",
    "WEBHOOK_DEAD_LETTERER",
    "DirectSends",
    "EventKind",
    "MerchantEvent",
    "WebhookClient",
    "WebhookSender",
    "attempts_of",
    "build_http_client",
    "check_webhook_url",
    "dead_letter_webhook",
    "event_body",
    "get_event",
    "list_events",
    "purge_merchant_events",
    "record_event",
    "replay_webhook",
    "rfc3339",
]
