"""Pipeline: database-side sweeps and relay back-off.

* `outbox.next_attempt_at` / `last_error`: a row whose publish failed waits out a
  capped exponential back-off instead of being claimed first on every relay pass;
  the relay's claim index is ordered by due time.
* `payments.webhook_dead_at`: the webhook job was dead-lettered (set with its DLQ row),
  so the webhook sweep never re-sends it.
* `payments.{payment,webhook}_sweeps` / `…_swept_at`: how often, and when last, the
  payment and webhook sweeps re-announced a payment; their back-off is computed from
  these (ledger events use `retry_count` / `updated_at`).
* partial indexes that serve the sweeps.

Revision ID: 0007_pipeline_sweeps
Revises: 0006_charge_attempts
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0007_pipeline_sweeps"
down_revision = "0006_charge_attempts"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    # now() is stable, so existing rows get the migration's time without a rewrite.
    "ALTER TABLE outbox ADD COLUMN next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now()",
    "ALTER TABLE outbox ADD COLUMN last_error TEXT",
    # The relay claims due rows in due order; rows backing off sit past the range scan.
    """
    CREATE INDEX outbox_due_idx ON outbox (next_attempt_at, id) WHERE published_at IS NULL
    """,
    "DROP INDEX outbox_unpublished_idx",
    "ALTER TABLE payments ADD COLUMN webhook_dead_at TIMESTAMPTZ",
    """
    ALTER TABLE payments ADD COLUMN payment_sweeps INTEGER NOT NULL DEFAULT 0
        CONSTRAINT payments_payment_sweeps_non_negative CHECK (payment_sweeps >= 0)
    """,
    "ALTER TABLE payments ADD COLUMN payment_swept_at TIMESTAMPTZ",
    """
    ALTER TABLE payments ADD COLUMN webhook_sweeps INTEGER NOT NULL DEFAULT 0
        CONSTRAINT payments_webhook_sweeps_non_negative CHECK (webhook_sweeps >= 0)
    """,
    "ALTER TABLE payments ADD COLUMN webhook_swept_at TIMESTAMPTZ",
    "CREATE INDEX payments_pending_created_idx ON payments (created_at) WHERE status = 'pending'",
    """
    CREATE INDEX payments_webhook_sweep_idx ON payments (processed_at)
        WHERE webhook_delivered_at IS NULL AND webhook_dead_at IS NULL
          AND webhook_url IS NOT NULL AND status <> 'pending'
    """,
]

DOWNGRADE: list[str] = [
    "DROP INDEX payments_webhook_sweep_idx",
    "DROP INDEX payments_pending_created_idx",
    "ALTER TABLE payments DROP COLUMN webhook_swept_at",
    "ALTER TABLE payments DROP COLUMN webhook_sweeps",
    "ALTER TABLE payments DROP COLUMN payment_swept_at",
    "ALTER TABLE payments DROP COLUMN payment_sweeps",
    "ALTER TABLE payments DROP COLUMN webhook_dead_at",
    "CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL",
    "DROP INDEX outbox_due_idx",
    "ALTER TABLE outbox DROP COLUMN last_error",
    "ALTER TABLE outbox DROP COLUMN next_attempt_at",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    # Without the marker, the webhook sweep of a re-upgraded database would re-send
    # webhooks that were dead-lettered: refuse unless forced.
    refuse_data_loss(
        "SELECT EXISTS (SELECT 1 FROM payments WHERE webhook_dead_at IS NOT NULL)",
        "payments.webhook_dead_at marks dead-lettered webhooks",
    )
    execute_all(DOWNGRADE)
