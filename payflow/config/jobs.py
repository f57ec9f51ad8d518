"""The scheduler and operations: the tick and the intervals of its own jobs, the zombie
and DLQ checks, and what `payflow status` calls wrong (docs/operations.md)."""

from __future__ import annotations

from pydantic import Field

from payflow.config.base import Slice


class JobsSettings(Slice):
    """The `jobs` slice (`settings.jobs`); the module's docstring says what it covers."""

    slice_name = "jobs"

    scheduler_interval_s: float = Field(default=5.0, gt=0)
    """Scheduler tick."""
    recon_hot_interval_s: float = Field(default=60.0, gt=0)
    """How often the scheduler's `recon_hot` job reconciles recently touched accounts."""
    recon_full_interval_s: float = Field(default=86400.0, gt=0)
    """How often `recon_full` reconciles every account and looks for duplicate / missing ledger
    rows."""
    checks_interval_s: float = Field(default=60.0, gt=0)
    """How often the checks `check_zombies`, `check_dlq_growth` and `check_stuck_claims` run."""
    recon_recent_minutes: int = Field(default=15, ge=1)
    """Window of the hot-path reconciliation."""
    zombie_processing_s: float = Field(default=300.0, gt=0)
    """A ledger event `processing` longer than this is a zombie (alert
    `zombies:events_processing`)."""
    zombie_pending_s: float = Field(default=900.0, gt=0)
    """A ledger event `pending`/`enqueued` longer than this is a zombie (alert
    `zombies:events_waiting`)."""
    zombie_payment_pending_s: float = Field(default=1800.0, gt=0)
    """A merchant payment `pending` longer than this is a zombie (alert
    `zombies:payments_pending`)."""
    zombie_webhook_s: float = Field(default=3600.0, gt=0)
    """A final payment's webhook neither delivered nor dead-lettered this long after `processed_at`
    is a zombie (alert `zombies:webhooks_undelivered`)."""
    dlq_growth_window_s: float = Field(default=3600.0, gt=0)
    """Window of the `dlq.growth` check: more than DLQ_GROWTH_THRESHOLD dead letters created within
    it fires the alert."""
    dlq_growth_threshold: int = Field(default=10, ge=0)
    """Dead letters created within DLQ_GROWTH_WINDOW_S above which `dlq.growth` fires."""
    stuck_claim_after_s: float = Field(default=600.0, gt=0)
    """A `processed_events` claim still `pending` this long breaks an invariant (critical alert
    `claims.stuck`)."""
    status_dlq_max_unresolved: int = Field(default=0, ge=0)
    """`payflow status` reports wrong when more dead letters than this are unresolved."""
    status_outbox_max_lag_s: float = Field(default=60.0, gt=0)
    """`payflow status` reports wrong when the oldest unpublished outbox row is older than this."""
    status_outbox_max_unpublished: int = Field(default=10000, ge=0)
    """`payflow status` reports wrong when more outbox rows than this are unpublished."""
    status_broker_timeout_s: float = Field(default=3.0, gt=0)
    """How long `payflow status` waits for RabbitMQ before showing the queues as unknown (and
    wrong)."""
