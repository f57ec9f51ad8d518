"""The payments' maintenance jobs, gathered by the scheduler (composition root)."""

from __future__ import annotations

from payflow.config import JobsSettings
from payflow.jobs.spec import JobSpec
from payflow.payments.sweeps import sweep_pending_payments_job

JOBS: tuple[JobSpec, ...] = (
    JobSpec(
        "sweep_pending_payments",
        sweep_pending_payments_job,
        lambda s: s.slice(JobsSettings).scheduler_interval_s,
        "re-announce payments still pending",
    ),
)
