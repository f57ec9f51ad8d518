"""The ledger's maintenance jobs, gathered by the scheduler (composition root)."""

from __future__ import annotations

from payflow.config import JobsSettings
from payflow.jobs.spec import JobSpec
from payflow.ledger.recovery import recover_stale_events_job
from payflow.ledger.retention import cleanup_processed_events_job

JOBS: tuple[JobSpec, ...] = (
    JobSpec(
        "recover_stale_events",
        recover_stale_events_job,
        lambda s: s.slice(JobsSettings).scheduler_interval_s,
        "re-announce ledger events nothing finishes",
    ),
    JobSpec(
        "cleanup_processed_events",
        cleanup_processed_events_job,
        lambda s: s.slice(JobsSettings).scheduler_interval_s,
        "retention of old posting claims (never pending ones)",
    ),
)
