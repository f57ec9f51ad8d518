"""Operations: job runs.

* `job_runs`: one row per run of a maintenance job (scheduler tick or `payflow jobs
  run`): start, end, outcome ok|alert|skipped|failed and a short summary, host and pid.
  A run is claimed (row inserted, `outcome` NULL) before the job starts; the latest
  `started_at` of a job decides when it is next due, so replicas never run a job more
  often than its interval. Kept `JOB_RUNS_RETENTION_DAYS` (job `cleanup_job_runs`).
* indexes for the operational checks: posting claims still `pending` (stuck claims,
  normally none at all) and dead letters by creation time (DLQ growth).

Revision ID: 0010_ops_jobs
Revises: 0009_roles
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0010_ops_jobs"
down_revision = "0009_roles"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    """
    CREATE TABLE job_runs (
        id BIGSERIAL PRIMARY KEY,
        job TEXT NOT NULL CONSTRAINT job_runs_job_length CHECK (length(job) BETWEEN 1 AND 100),
        started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        finished_at TIMESTAMPTZ,
        outcome TEXT CONSTRAINT job_runs_outcome_valid
            CHECK (outcome IN ('ok', 'alert', 'skipped', 'failed')),
        summary TEXT NOT NULL DEFAULT ''
            CONSTRAINT job_runs_summary_length CHECK (length(summary) <= 2000),
        host TEXT NOT NULL DEFAULT '',
        pid INTEGER NOT NULL DEFAULT 0,
        CONSTRAINT job_runs_finished_with_outcome
            CHECK ((finished_at IS NULL) = (outcome IS NULL))
    )
    """,
    "CREATE INDEX job_runs_job_started_idx ON job_runs (job, started_at DESC)",
    "CREATE INDEX job_runs_started_idx ON job_runs (started_at)",
    """
    CREATE INDEX processed_events_pending_idx ON processed_events (created_at)
        WHERE outcome = 'pending'
    """,
    "CREATE INDEX dead_letter_queue_created_idx ON dead_letter_queue (created_at)",
]

DATA_AT_RISK: list[tuple[str, str]] = [
    ("SELECT EXISTS (SELECT 1 FROM job_runs)", "job run history"),
]

DOWNGRADE: list[str] = [
    "DROP INDEX dead_letter_queue_created_idx",
    "DROP INDEX processed_events_pending_idx",
    "DROP TABLE job_runs",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    for check_sql, what in DATA_AT_RISK:
        refuse_data_loss(check_sql, what)
    execute_all(DOWNGRADE)
