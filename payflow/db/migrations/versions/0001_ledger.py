"""Ledger core: assets, accounts, payment events, the append-only ledger,
processed events and the dead-letter queue.

Revision ID: 0001_ledger
Revises:
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0001_ledger"
down_revision = None
branch_labels = None
depends_on = None

UPGRADE = [
    """
    CREATE TABLE assets (
        code TEXT PRIMARY KEY CONSTRAINT assets_code_format CHECK (code ~ '^[A-Z0-9]{2,12}$'),
        scale SMALLINT NOT NULL CONSTRAINT assets_scale_range CHECK (scale BETWEEN 0 AND 18),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    """
    INSERT INTO assets (code, scale) VALUES
        ('ETH', 18), ('USDC', 6), ('USDT', 6), ('WBTC', 8),
        ('DAI', 18), ('RUB', 2), ('USD', 2), ('EUR', 2)
    """,
    """
    CREATE TABLE accounts (
        id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
        asset TEXT NOT NULL REFERENCES assets (code),
        balance NUMERIC(38, 18) NOT NULL DEFAULT 0
            CONSTRAINT accounts_balance_non_negative CHECK (balance >= 0),
        initial_balance NUMERIC(38, 18) NOT NULL DEFAULT 0
            CONSTRAINT accounts_initial_balance_non_negative CHECK (initial_balance >= 0),
        status TEXT NOT NULL DEFAULT 'active'
            CONSTRAINT accounts_status_valid CHECK (status IN ('active', 'frozen')),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE payment_events (
        event_id TEXT PRIMARY KEY
            CONSTRAINT payment_events_event_id_length CHECK (length(event_id) BETWEEN 1 AND 200),
        account_id UUID NOT NULL REFERENCES accounts (id),
        amount NUMERIC(38, 18) NOT NULL
            CONSTRAINT payment_events_amount_positive CHECK (amount > 0),
        event_type TEXT NOT NULL CONSTRAINT payment_events_type_valid CHECK (
            event_type IN ('deposit', 'airdrop', 'withdrawal', 'withdrawal_fee', 'payment_credit')
        ),
        status TEXT NOT NULL DEFAULT 'pending' CONSTRAINT payment_events_status_valid CHECK (
            status IN ('pending', 'enqueued', 'processing', 'confirmed', 'failed')
        ),
        retry_count INTEGER NOT NULL DEFAULT 0
            CONSTRAINT payment_events_retry_count_non_negative CHECK (retry_count >= 0),
        last_error TEXT,
        trace_id TEXT,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    # Pollers read pending events oldest first, and stale ones by last touch.
    """
    CREATE INDEX payment_events_pending_idx ON payment_events (created_at)
        WHERE status = 'pending'
    """,
    """
    CREATE INDEX payment_events_enqueued_idx ON payment_events (updated_at)
        WHERE status = 'enqueued'
    """,
    """
    CREATE INDEX payment_events_processing_idx ON payment_events (updated_at)
        WHERE status = 'processing'
    """,
    "CREATE INDEX payment_events_account_idx ON payment_events (account_id)",
    """
    CREATE TABLE balance_events (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        account_id UUID NOT NULL REFERENCES accounts (id),
        amount NUMERIC(38, 18) NOT NULL
            CONSTRAINT balance_events_amount_non_zero CHECK (amount <> 0),
        event_type TEXT NOT NULL,
        source_event_id TEXT NOT NULL REFERENCES payment_events (event_id),
        balance_after NUMERIC(38, 18) NOT NULL
            CONSTRAINT balance_events_balance_after_non_negative CHECK (balance_after >= 0),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        CONSTRAINT balance_events_source_unique UNIQUE (source_event_id, event_type)
    )
    """,
    "CREATE INDEX balance_events_account_idx ON balance_events (account_id, id)",
    # Append-only and time-ordered: BRIN is tiny and finds recently touched accounts.
    "CREATE INDEX balance_events_created_brin ON balance_events USING brin (created_at)",
    """
    CREATE FUNCTION balance_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'balance_events is append-only: % refused', TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END
    $$
    """,
    """
    CREATE TRIGGER balance_events_no_update_delete
        BEFORE UPDATE OR DELETE ON balance_events
        FOR EACH ROW EXECUTE FUNCTION balance_events_append_only()
    """,
    """
    CREATE TRIGGER balance_events_no_truncate
        BEFORE TRUNCATE ON balance_events
        FOR EACH STATEMENT EXECUTE FUNCTION balance_events_append_only()
    """,
    """
    CREATE TABLE processed_events (
        idempotency_key TEXT PRIMARY KEY,
        event_id TEXT NOT NULL,
        outcome TEXT NOT NULL CONSTRAINT processed_events_outcome_valid CHECK (
            outcome IN ('pending', 'success', 'insufficient_funds', 'account_frozen')
        ),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    "CREATE INDEX processed_events_created_idx ON processed_events (created_at)",
    """
    CREATE TABLE dead_letter_queue (
        id BIGSERIAL PRIMARY KEY,
        source TEXT NOT NULL CONSTRAINT dead_letter_queue_source_valid CHECK (
            source IN ('payment_event', 'payment', 'webhook')
        ),
        subject_id TEXT NOT NULL,
        payload JSONB NOT NULL DEFAULT '{}'::jsonb,
        error TEXT NOT NULL,
        attempt INTEGER NOT NULL CONSTRAINT dead_letter_queue_attempt_positive CHECK (attempt >= 1),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        resolved_at TIMESTAMPTZ,
        resolved_by TEXT,
        resolution TEXT,
        CONSTRAINT dead_letter_queue_resolution_complete CHECK (
            (resolved_at IS NULL) = (resolved_by IS NULL)
        )
    )
    """,
    """
    CREATE INDEX dead_letter_queue_unresolved_idx ON dead_letter_queue (created_at)
        WHERE resolved_at IS NULL
    """,
    "CREATE INDEX dead_letter_queue_subject_idx ON dead_letter_queue (source, subject_id)",
]

DOWNGRADE = [
    "DROP TABLE dead_letter_queue",
    "DROP TABLE processed_events",
    "DROP TABLE balance_events",
    "DROP FUNCTION balance_events_append_only()",
    "DROP TABLE payment_events",
    "DROP TABLE accounts",
    "DROP TABLE assets",
]


# What the downgrade would destroy: it refuses while any exists, unless forced.
DATA_AT_RISK = [
    ("SELECT EXISTS (SELECT 1 FROM accounts)", "accounts and their balances"),
    ("SELECT EXISTS (SELECT 1 FROM payment_events)", "payment events"),
    ("SELECT EXISTS (SELECT 1 FROM balance_events)", "ledger rows"),
    ("SELECT EXISTS (SELECT 1 FROM processed_events)", "posting claims"),
    ("SELECT EXISTS (SELECT 1 FROM dead_letter_queue)", "dead letters"),
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    for check_sql, what in DATA_AT_RISK:
        refuse_data_loss(check_sql, what)
    execute_all(DOWNGRADE)
