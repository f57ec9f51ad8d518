"""HTTP API: idempotency records, deposit addresses and unmatched provider events.

Revision ID: 0003_api
Revises: 0002_payments_outbox
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0003_api"
down_revision = "0002_payments_outbox"
branch_labels = None
depends_on = None

UPGRADE = [
    # One row per (merchant, operation, Idempotency-Key). A request claims the key and
    # stores its response in the same transaction as the work it did.
    """
    CREATE TABLE api_idempotency (
        merchant_id UUID NOT NULL REFERENCES merchants (id),
        scope TEXT NOT NULL CONSTRAINT api_idempotency_scope_length
            CHECK (length(scope) BETWEEN 1 AND 200),
        key TEXT NOT NULL CONSTRAINT api_idempotency_key_length
            CHECK (length(key) BETWEEN 1 AND 255),
        request_hash TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'in_progress'
            CONSTRAINT api_idempotency_state_valid CHECK (state IN ('in_progress', 'completed')),
        response_status SMALLINT,
        response_body JSON,  -- JSON keeps the exact text, so replays are byte-identical
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        CONSTRAINT api_idempotency_pkey PRIMARY KEY (merchant_id, scope, key),
        CONSTRAINT api_idempotency_response_when_completed CHECK (
            (state = 'completed') = (response_status IS NOT NULL AND response_body IS NOT NULL)
        )
    )
    """,
    "CREATE INDEX api_idempotency_created_idx ON api_idempotency (created_at)",
    # The provider names an address, never an account: this table is the only mapping.
    """
    CREATE TABLE deposit_addresses (
        chain TEXT NOT NULL CONSTRAINT deposit_addresses_chain_format
            CHECK (chain ~ '^[A-Z0-9_]{2,40}$'),
        address TEXT NOT NULL CONSTRAINT deposit_addresses_address_format
            CHECK (address ~ '^0x[0-9a-f]{40}$' OR address ~ '^[1-9A-HJ-NP-Za-km-z]{8,128}$'),
        account_id UUID NOT NULL REFERENCES accounts (id),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        CONSTRAINT deposit_addresses_pkey PRIMARY KEY (chain, address)
    )
    """,
    "CREATE INDEX deposit_addresses_account_idx ON deposit_addresses (account_id)",
    # Provider events that matched no deposit address (or the wrong asset), kept for review.
    """
    CREATE TABLE unmatched_provider_events (
        event_id TEXT PRIMARY KEY
            CONSTRAINT unmatched_event_id_length CHECK (length(event_id) BETWEEN 1 AND 200),
        reason TEXT NOT NULL CONSTRAINT unmatched_reason_valid CHECK (
            reason IN ('unknown_address', 'asset_mismatch', 'unknown_asset', 'unsupported')
        ),
        chain TEXT NOT NULL,
        address TEXT,
        asset TEXT,
        amount TEXT,
        tx_hash TEXT,
        payload JSONB NOT NULL,
        trace_id TEXT,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        reviewed_at TIMESTAMPTZ
    )
    """,
    """
    CREATE INDEX unmatched_provider_events_open_idx ON unmatched_provider_events (created_at)
        WHERE reviewed_at IS NULL
    """,
]

DOWNGRADE = [
    "DROP TABLE unmatched_provider_events",
    "DROP TABLE deposit_addresses",
    "DROP TABLE api_idempotency",
]


# What the downgrade would destroy: it refuses while any exists, unless forced.
DATA_AT_RISK = [
    ("SELECT EXISTS (SELECT 1 FROM api_idempotency)", "stored Idempotency-Key responses"),
    (
        "SELECT EXISTS (SELECT 1 FROM deposit_addresses)",
        "deposit addresses (the only address-to-account mapping)",
    ),
    (
        "SELECT EXISTS (SELECT 1 FROM unmatched_provider_events)",
        "unmatched provider events kept for review",
    ),
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    for check_sql, what in DATA_AT_RISK:
        refuse_data_loss(check_sql, what)
    execute_all(DOWNGRADE)
