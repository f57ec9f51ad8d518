"""Drop `payments_webhook_undelivered_idx`, superseded by `payments_webhook_sweep_idx`.

0004 indexed final payments whose webhook is not delivered, "for operators and the
bench"; 0007's sweep index covers the same rows minus the dead-lettered ones, and every
query that looks for undelivered webhooks (the sweep, the ops status) also
asks `webhook_dead_at IS NULL`, so no plan used the older index. It only cost an index
entry on every finalized payment and its removal on delivery, on the hot path.

Revision ID: 0021_drop_undelivered_index
Revises: 0020_one_statement_posting
"""

from payflow.db.migrations.statements import execute_all

revision = "0021_drop_undelivered_index"
down_revision = "0020_one_statement_posting"
branch_labels = None
depends_on = None

UPGRADE: list[str] = ["DROP INDEX IF EXISTS payments_webhook_undelivered_idx"]

DOWNGRADE: list[str] = [
    """
    CREATE INDEX payments_webhook_undelivered_idx ON payments (processed_at)
        WHERE webhook_delivered_at IS NULL AND webhook_url IS NOT NULL AND status <> 'pending'
    """,
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
