"""Delivery pipeline: one settlement account per merchant and asset, opened race-free
on the first credit (merchants may own any number of other accounts).

Revision ID: 0004_pipeline
Revises: 0003_api
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0004_pipeline"
down_revision = "0003_api"
branch_labels = None
depends_on = None

UPGRADE = [
    # The payment worker opens a merchant's account for a currency with
    # INSERT ... ON CONFLICT DO NOTHING; this index is what makes that race-free.
    "ALTER TABLE accounts ADD COLUMN settlement BOOLEAN NOT NULL DEFAULT false",
    """
    ALTER TABLE accounts ADD CONSTRAINT accounts_settlement_has_merchant
        CHECK (NOT settlement OR merchant_id IS NOT NULL)
    """,
    """
    CREATE UNIQUE INDEX accounts_merchant_settlement_unique ON accounts (merchant_id, asset)
        WHERE settlement
    """,
    # Webhook jobs not yet delivered, for operators and the bench.
    """
    CREATE INDEX payments_webhook_undelivered_idx ON payments (processed_at)
        WHERE webhook_delivered_at IS NULL AND webhook_url IS NOT NULL AND status <> 'pending'
    """,
]

DOWNGRADE = [
    "DROP INDEX payments_webhook_undelivered_idx",
    "DROP INDEX accounts_merchant_settlement_unique",
    "ALTER TABLE accounts DROP COLUMN settlement",
]


# What the downgrade would destroy: it refuses while any exists, unless forced.
DATA_AT_RISK = [
    (
        "SELECT EXISTS (SELECT 1 FROM accounts WHERE settlement)",
        "the settlement flag of existing accounts: without it the next payment"
        " opens a second settlement account",
    ),
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    for check_sql, what in DATA_AT_RISK:
        refuse_data_loss(check_sql, what)
    execute_all(DOWNGRADE)
