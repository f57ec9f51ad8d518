"""Merchants, merchant payments and the transactional outbox.

Revision ID: 0002_payments_outbox
Revises: 0001_ledger
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0002_payments_outbox"
down_revision = "0001_ledger"
branch_labels = None
depends_on = None

UPGRADE = [
    """
    CREATE TABLE merchants (
        id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
        name TEXT NOT NULL CONSTRAINT merchants_name_length CHECK (length(name) BETWEEN 1 AND 200),
        api_key_hash TEXT NOT NULL CONSTRAINT merchants_api_key_hash_unique UNIQUE,
        webhook_secret TEXT NOT NULL,
        is_admin BOOLEAN NOT NULL DEFAULT false,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    "ALTER TABLE accounts ADD COLUMN merchant_id UUID REFERENCES merchants (id)",
    "CREATE INDEX accounts_merchant_idx ON accounts (merchant_id) WHERE merchant_id IS NOT NULL",
    """
    CREATE TABLE payments (
        id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
        merchant_id UUID NOT NULL REFERENCES merchants (id),
        amount NUMERIC(38, 18) NOT NULL CONSTRAINT payments_amount_positive CHECK (amount > 0),
        currency TEXT NOT NULL REFERENCES assets (code),
        description TEXT CONSTRAINT payments_description_length CHECK (length(description) <= 512),
        metadata JSONB NOT NULL DEFAULT '{}'::jsonb,
        status TEXT NOT NULL DEFAULT 'pending' CONSTRAINT payments_status_valid CHECK (
            status IN ('pending', 'succeeded', 'failed')
        ),
        idempotency_key TEXT NOT NULL,
        webhook_url TEXT,
        webhook_delivered_at TIMESTAMPTZ,
        webhook_attempts INTEGER NOT NULL DEFAULT 0
            CONSTRAINT payments_webhook_attempts_non_negative CHECK (webhook_attempts >= 0),
        trace_id TEXT,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        processed_at TIMESTAMPTZ,
        CONSTRAINT payments_merchant_idempotency_unique UNIQUE (merchant_id, idempotency_key),
        CONSTRAINT payments_processed_when_terminal CHECK (
            (status = 'pending') = (processed_at IS NULL)
        )
    )
    """,
    """
    CREATE INDEX payments_merchant_created_idx
        ON payments (merchant_id, created_at DESC, id DESC)
    """,
    """
    CREATE TABLE outbox (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        topic TEXT NOT NULL,
        payload JSONB NOT NULL,
        trace_id TEXT,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        published_at TIMESTAMPTZ,
        publish_attempts INTEGER NOT NULL DEFAULT 0
    )
    """,
    # The relay reads only unpublished rows, oldest first; retention deletes old published ones.
    "CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL",
    "CREATE INDEX outbox_published_idx ON outbox (published_at) WHERE published_at IS NOT NULL",
]

DOWNGRADE = [
    "DROP TABLE outbox",
    "DROP TABLE payments",
    "ALTER TABLE accounts DROP COLUMN merchant_id",
    "DROP TABLE merchants",
]


# What the downgrade would destroy: it refuses while any exists, unless forced.
DATA_AT_RISK = [
    ("SELECT EXISTS (SELECT 1 FROM merchants)", "merchants, their API keys and webhook secrets"),
    ("SELECT EXISTS (SELECT 1 FROM payments)", "merchant payments"),
    ("SELECT EXISTS (SELECT 1 FROM outbox WHERE published_at IS NULL)", "unpublished outbox rows"),
    (
        "SELECT EXISTS (SELECT 1 FROM accounts WHERE merchant_id IS NOT NULL)",
        "the owner of merchant accounts",
    ),
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    for check_sql, what in DATA_AT_RISK:
        refuse_data_loss(check_sql, what)
    execute_all(DOWNGRADE)
