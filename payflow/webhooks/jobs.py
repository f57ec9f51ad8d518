"""The webhooks' maintenance jobs, gathered by the scheduler (composition root)."""

from __future__ import annotations

from payflow.config import JobsSettings
from payflow.jobs.spec import JobSpec
from payflow.webhooks.attempts.retention import cleanup_webhook_attempt_log_job
from payflow.webhooks.endpoints.jobs import JOBS as ENDPOINT_JOBS
from payflow.webhooks.event_retention import cleanup_merchant_events_job
from payflow.webhooks.sweeps import sweep_undelivered_webhooks_job

JOBS: tuple[JobSpec, ...] = (
    JobSpec(
        "sweep_undelivered_webhooks",
        sweep_undelivered_webhooks_job,
        lambda s: s.slice(JobsSettings).scheduler_interval_s,
        "re-announce undelivered webhooks",
    ),
    JobSpec(
        "cleanup_webhook_attempt_log",
        cleanup_webhook_attempt_log_job,
        lambda s: s.slice(JobsSettings).scheduler_interval_s,
        "retention of the webhook attempt log (never under 1 day)",
    ),
    JobSpec(
        "cleanup_merchant_events",
        cleanup_merchant_events_job,
        lambda s: s.slice(JobsSettings).scheduler_interval_s,
        "retention of the merchants' event stream (EVENT_RETENTION_DAYS, never under 1 day)",
    ),
    *ENDPOINT_JOBS,
)
