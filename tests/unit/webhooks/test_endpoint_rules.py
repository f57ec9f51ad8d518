"""An endpoint delivery's headers (one signature, or two during a rotation's overlap, as
the `standardwebhooks` library verifies them), the event filter's rules and the retry
tiers' schedule."""

from __future__ import annotations

import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from payflow.api.auth import new_webhook_secret
from payflow.errors import BadInput, WebhookHTTPStatus
from payflow.webhooks.endpoints import delivery_headers, valid_events
from payflow.webhooks.tiers import retry_after_s

BODY = b'{"type":"payment.succeeded","timestamp":"2026-01-01T00:00:00+00:00","data":{}}'
EVENT = "evt_" + "ab" * 16


def test_one_secret_signs_once_and_the_library_verifies_it() -> None:
    secret = new_webhook_secret()
    headers = delivery_headers(secret, None, EVENT, int(time.time()), BODY)
    assert headers["webhook-id"] == EVENT
    assert len(headers["webhook-signature"].split(" ")) == 1
    Webhook(secret).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_webhook_secret()).verify(BODY, headers)


def test_during_the_overlap_both_secrets_verify() -> None:
    new, old = new_webhook_secret(), new_webhook_secret()
    headers = delivery_headers(new, old, EVENT, int(time.time()), BODY)
    entries = headers["webhook-signature"].split(" ")
    assert len(entries) == 2 and all(e.startswith("v1,") for e in entries)
    Webhook(new).verify(BODY, headers)
    Webhook(old).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new).verify(BODY + b" ", headers)


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        (["*"], ["*"]),
        (
            ["payment.failed", "payment.succeeded", "payment.failed"],
            ["payment.failed", "payment.succeeded"],
        ),
    ],
)
def test_event_filters_are_normalised(events: list[str], expected: list[str]) -> None:
    assert valid_events(events) == expected


@pytest.mark.parametrize(
    "events", [[], ["*", "payment.failed"], ["payment.exploded"], ["PAYMENT.FAILED"]]
)
def test_bad_event_filters_are_refused(events: list[str]) -> None:
    with pytest.raises(BadInput):
        valid_events(events)


def test_the_retry_schedule_follows_the_tiers() -> None:
    tiers = (2000, 4000, 8000)
    retryable = WebhookHTTPStatus(503)
    assert [retry_after_s(tiers, retryable, n) for n in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, None]
    assert retry_after_s(tiers, None, 1) is None
