"""How long finished rows are kept (claims, idempotency keys, outbox rows, job runs,
webhook attempts, merchant events) and the batches their cleanup jobs delete in."""

from __future__ import annotations

from pydantic import Field

from payflow.config.base import Slice


class RetentionSettings(Slice):
    """The `retention` slice (`settings.retention`); the module's docstring says what it covers."""

    slice_name = "retention"

    processed_events_retention_days: int = Field(default=90, ge=0)
    """Posting claims of finished events older than this are deleted (never below 14 days; 0 keeps
    them)."""
    idempotency_retention_hours: int = Field(default=24, ge=1)
    """How long `api_idempotency` records are kept (the scheduler's `cleanup_idempotency_keys`
    deletes older ones); a later retry is judged against the payment or withdrawal event the key
    made."""
    outbox_retention_hours: float = Field(default=24.0, ge=0)
    """Published outbox rows older than this are deleted (0 keeps them)."""
    job_runs_retention_days: float = Field(default=7.0, gt=0)
    """`job_runs` rows older than this are deleted (job `cleanup_job_runs`)."""
    processed_events_cleanup_batch: int = Field(default=5000, ge=1, le=10000)
    """Claims deleted per batch by `cleanup_processed_events` (1-10,000)."""
    processed_events_cleanup_max_batches: int = Field(default=20, ge=1)
    """Batches per run of `cleanup_processed_events`; the next run continues."""
    processed_events_cleanup_pause_s: float = Field(default=0.2, ge=0)
    """Pause between two batches of `cleanup_processed_events`."""
    # Webhook attempt log retention (`cleanup_webhook_attempt_log`, migration 0019): rows
    # older than this many days go (the function never goes below 1 day); 0 keeps them.
    webhook_attempt_log_retention_days: int = Field(default=30, ge=0, le=36500)
    """Webhook attempt log rows (`webhook_attempt_log`) older than this are deleted by
    `cleanup_webhook_attempt_log` (never below 1 day; 0 keeps them)."""
    webhook_attempt_log_cleanup_batch: int = Field(default=5000, ge=1, le=10000)
    """Attempt rows deleted per batch by `cleanup_webhook_attempt_log` (1-10,000)."""
    webhook_attempt_log_cleanup_max_batches: int = Field(default=20, ge=1)
    """Batches per run of `cleanup_webhook_attempt_log`; the next run continues."""
    event_retention_days: int = Field(default=30, ge=1, le=36500)
    """Merchant events (`merchant_events`, the events API) are kept at least this many days,
    then deleted by the job `cleanup_merchant_events` (1-36,500)."""
    event_cleanup_batch: int = Field(default=5000, ge=1, le=10000)
    """Events deleted per batch by `cleanup_merchant_events` (1-10,000)."""
    event_cleanup_max_batches: int = Field(default=20, ge=1)
    """Batches per run of `cleanup_merchant_events`; the next run continues."""
