"""The workers and sweeps of the payment pipeline: gateway calls in flight, the charge
lease, the credit hold, shutdown grace and the re-announcement sweeps
(docs/pipeline.md)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from payflow.config.base import Slice


def default_credit_hold_s(outbox_stale_alert_s: float) -> float:
    """CREDIT_HOLD_S when unset: 15 s, or half OUTBOX_STALE_ALERT_S when that is below 30 s,
    so a held credit job never looks stale."""
    return min(15.0, outbox_stale_alert_s / 2)


class PipelineSettings(Slice):
    """The `pipeline` slice (`settings.pipeline`); the module's docstring says what it covers."""

    slice_name = "pipeline"
    derived_defaults: ClassVar[dict[str, str]] = {
        "credit_hold_s": "min(15, OUTBOX_STALE_ALERT_S / 2)"
    }

    # Gateway calls in flight per process (also the payments queue's prefetch). Little's
    # law: 240 payments/s at a 3.5 s mean gateway delay needs 840 calls in flight.
    gateway_max_in_flight: int = Field(default=1000, ge=1, le=10000)
    """Gateway calls in flight per worker process, also the `payments` queue's prefetch; independent
    of `BROKER_PREFETCH` (ledger) and `DB_POOL_MAX` (a call holds no connection). Size it by
    Little's law: payments/s wanted * mean gateway latency."""
    charge_lease_s: float = Field(default=10.0, gt=0)
    """How long a claimed gateway charge belongs to its worker (and the gateway call's timeout); an
    unanswered claim older than this is taken over by the next delivery, which asks the gateway
    for the outcome. Keep it above the gateway's worst latency and below the sum of
    `RETRY_TIERS_MS`."""
    # A payment's credit is posted by the worker that finalized it, right after the
    # commit; its ledger.event job is held back this long and published only if that
    # worker could not post it (it died, or the full path must decide). Above
    # LOCK_TIMEOUT_MS, so a post waiting on a hot account never races its own job.
    credit_hold_s: float = Field(default=15.0, ge=0, le=3600)
    """The finalizing worker posts a payment's credit itself: normally in the finalize's own commit
    (no job at all); when that statement cannot post (a contended or refused balance change), the
    credit's `ledger.event` job is held back this long while the worker posts it right after the
    commit; the relay publishes it only if that worker died or the full posting path must decide
    (an overflow). Keep it above `LOCK_TIMEOUT_MS`; it must stay below `OUTBOX_STALE_ALERT_S`
    (unset: 15, or half of that when less); `0` turns both shortcuts off (the ledger worker posts
    every credit)."""
    shutdown_grace_s: float = Field(default=30.0, gt=0)
    """How long SIGTERM waits for in-flight messages."""
    stale_event_timeout_s: float = Field(default=300.0, gt=0)
    """A ledger event left unfinished this long is re-announced (first wait; doubles per
    re-announcement)."""
    max_event_retries: int = Field(default=10, ge=0)
    """Alert threshold, not a failure: the N-th and every later re-announcement of one subject
    (event, payment, webhook job) logs `payflow.events.waiting` / `payflow.payments.waiting` /
    `payflow.webhooks.waiting`; nothing is failed for waiting."""
    payment_sweep_after_s: float = Field(default=300.0, gt=0)
    """A payment still `pending` this long is re-announced (`payment.created`)."""
    webhook_sweep_after_s: float = Field(default=600.0, gt=0)
    """A final payment's webhook neither delivered nor dead-lettered this long after `processed_at`
    is re-announced (`webhook.deliver`)."""
    sweep_max_backoff_s: float = Field(default=3600.0, gt=0)
    """Cap of the doubling wait between two re-announcements of one subject."""
