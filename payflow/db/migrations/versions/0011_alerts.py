"""Operations: the alerts table.

One row per incident of an alert key: `fire` upserts the OPEN row of its key (count + 1,
last_seen, latest severity/message/details), `resolve` closes it, and an operator may
acknowledge it. The partial unique index keeps at most one open row per key, so
concurrent fires of one key meet in ON CONFLICT instead of opening two incidents.
The table is the record of alerts; delivery (log, webhook, PagerDuty) only notifies.

Revision ID: 0011_alerts
Revises: 0010_ops_jobs
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0011_alerts"
down_revision = "0010_ops_jobs"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    """
    CREATE TABLE alerts (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        key text NOT NULL
            CONSTRAINT alerts_key_length CHECK (length(key) BETWEEN 1 AND 200),
        severity text NOT NULL
            CONSTRAINT alerts_severity_valid CHECK (severity IN ('info', 'warning', 'critical')),
        message text NOT NULL
            CONSTRAINT alerts_message_length CHECK (length(message) <= 4000),
        details jsonb NOT NULL DEFAULT '{}'::jsonb
            CONSTRAINT alerts_details_object CHECK (jsonb_typeof(details) = 'object'),
        first_seen timestamptz NOT NULL DEFAULT now(),
        last_seen timestamptz NOT NULL DEFAULT now(),
        count bigint NOT NULL DEFAULT 1
            CONSTRAINT alerts_count_positive CHECK (count >= 1),
        resolved_at timestamptz,
        acknowledged_at timestamptz,
        acknowledged_by text
            CONSTRAINT alerts_acknowledged_by_length CHECK (length(acknowledged_by) <= 200),
        CONSTRAINT alerts_seen_order CHECK (last_seen >= first_seen),
        CONSTRAINT alerts_resolved_after_first_seen
            CHECK (resolved_at IS NULL OR resolved_at >= first_seen),
        CONSTRAINT alerts_acknowledged_by_whom
            CHECK ((acknowledged_at IS NULL) = (acknowledged_by IS NULL))
    )
    """,
    "CREATE UNIQUE INDEX alerts_one_open_per_key ON alerts (key) WHERE resolved_at IS NULL",
    "CREATE INDEX alerts_by_last_seen ON alerts (last_seen DESC)",
]

DOWNGRADE: list[str] = [
    "DROP TABLE alerts",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    refuse_data_loss("SELECT EXISTS (SELECT 1 FROM alerts)", "recorded alerts")
    execute_all(DOWNGRADE)
