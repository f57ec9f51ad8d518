"""Chain truth: deposit observations and their lifecycle.

- `chain_deposit_reports`: every report of a transfer (source + what it claims:
  recipient, contract, units, position or a block-level log index), once per distinct
  claim; status pending → confirmed (linked to the deposit) | refuted (kept for review
  with a reason). A wrong report never taints the real transfer.
- `chain_deposits`: one row per transfer THE NODE SHOWED, keyed by its identity
  `<chain>:<tx hash>:<position>` (UNIQUE (chain, tx_hash, position) too); its content is
  the node's, never a report's. Status verified → credited | orphaned, orphaned →
  verified (re-included), credited → reversed (a reorg deeper than N on a
  confirmations chain). Block number and hash; the `sources` that reported it; the
  credit and reversal event ids; the shortfall a reversal could not debit.
- `payment_events.event_type` gains `deposit_reversal` (the compensating debit
  `reorg:<transfer id>`).

The service role may not DELETE either table (hook `payflow_grant_extra_0013_chain_deposits`).

Revision ID: 0013_chain_deposits
Revises: 0012_grant_hooks
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0013_chain_deposits"
down_revision = "0012_grant_hooks"
branch_labels = None
depends_on = None

OLD_TYPES = "'deposit', 'airdrop', 'withdrawal', 'withdrawal_fee', 'payment_credit'"
NEW_TYPES = OLD_TYPES + ", 'deposit_reversal'"
STATUSES = "'verified', 'orphaned', 'credited', 'reversed'"

UPGRADE: list[str] = [
    "ALTER TABLE payment_events DROP CONSTRAINT payment_events_type_valid",
    f"""
    ALTER TABLE payment_events ADD CONSTRAINT payment_events_type_valid
        CHECK (event_type IN ({NEW_TYPES}))
    """,
    f"""
    CREATE TABLE chain_deposits (
        transfer_id TEXT PRIMARY KEY,
        chain TEXT NOT NULL REFERENCES chains (chain),
        tx_hash TEXT NOT NULL CONSTRAINT chain_deposits_tx_hash_format
            CHECK (tx_hash ~ '^0x[0-9a-f]{{64}}$'),
        position INTEGER NOT NULL CONSTRAINT chain_deposits_position_range
            CHECK (position >= -1),
        to_address TEXT NOT NULL,
        contract TEXT CONSTRAINT chain_deposits_contract_format
            CHECK (contract ~ '^0x[0-9a-f]{{40}}$'),
        units NUMERIC(78, 0) NOT NULL CONSTRAINT chain_deposits_units_positive
            CHECK (units > 0),
        account_id UUID NOT NULL REFERENCES accounts (id),
        asset TEXT NOT NULL REFERENCES assets (code),
        amount NUMERIC(38, 18) NOT NULL CONSTRAINT chain_deposits_amount_positive
            CHECK (amount > 0),
        status TEXT NOT NULL DEFAULT 'verified'
            CONSTRAINT chain_deposits_status_valid CHECK (status IN ({STATUSES})),
        block_number BIGINT NOT NULL,
        block_hash TEXT NOT NULL,
        sources TEXT[] NOT NULL,
        credit_event_id TEXT UNIQUE,
        reversal_event_id TEXT UNIQUE,
        shortfall NUMERIC(38, 18) CONSTRAINT chain_deposits_shortfall_positive
            CHECK (shortfall > 0),
        checks INTEGER NOT NULL DEFAULT 0,
        next_check_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        trace_id TEXT,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        verified_at TIMESTAMPTZ,
        credited_at TIMESTAMPTZ,
        CONSTRAINT chain_deposits_identity UNIQUE (chain, tx_hash, position),
        CONSTRAINT chain_deposits_id_format
            CHECK (transfer_id = chain || ':' || tx_hash || ':' || position),
        CONSTRAINT chain_deposits_credit_known
            CHECK (status NOT IN ('credited', 'reversed') OR credit_event_id IS NOT NULL)
    )
    """,
    """
    CREATE INDEX chain_deposits_due ON chain_deposits (next_check_at)
        WHERE status IN ('verified', 'orphaned')
    """,
    """
    CREATE INDEX chain_deposits_pending ON chain_deposits (account_id)
        WHERE status = 'verified'
    """,
    """
    CREATE INDEX chain_deposits_credited ON chain_deposits (chain, block_number)
        WHERE status = 'credited'
    """,
    """
    CREATE TABLE chain_deposit_reports (
        id BIGSERIAL PRIMARY KEY,
        source TEXT NOT NULL CONSTRAINT chain_deposit_reports_source_valid
            CHECK (source IN ('webhook', 'alchemy', 'scanner')),
        provider_event_id TEXT CONSTRAINT chain_deposit_reports_provider_id_unique UNIQUE,
        chain TEXT NOT NULL REFERENCES chains (chain),
        tx_hash TEXT NOT NULL,
        position INTEGER CONSTRAINT chain_deposit_reports_position_range
            CHECK (position >= -1),
        log_index INTEGER,
        claim TEXT NOT NULL,
        to_address TEXT NOT NULL,
        contract TEXT,
        units NUMERIC(78, 0) NOT NULL,
        account_id UUID NOT NULL REFERENCES accounts (id),
        amount NUMERIC(38, 18) NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending' CONSTRAINT chain_deposit_reports_status_valid
            CHECK (status IN ('pending', 'confirmed', 'refuted')),
        transfer_id TEXT REFERENCES chain_deposits (transfer_id),
        reason TEXT,
        checks INTEGER NOT NULL DEFAULT 0,
        next_check_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        trace_id TEXT,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        decided_at TIMESTAMPTZ,
        CONSTRAINT chain_deposit_reports_once UNIQUE (source, chain, tx_hash, claim),
        CONSTRAINT chain_deposit_reports_confirmed_linked
            CHECK (status <> 'confirmed' OR transfer_id IS NOT NULL),
        CONSTRAINT chain_deposit_reports_refuted_reason
            CHECK (status <> 'refuted' OR reason IS NOT NULL)
    )
    """,
    """
    CREATE INDEX chain_deposit_reports_due ON chain_deposit_reports (next_check_at)
        WHERE status = 'pending'
    """,
    """
    CREATE INDEX chain_deposit_reports_account ON chain_deposit_reports (account_id)
        WHERE status = 'pending'
    """,
    """
    CREATE INDEX chain_deposit_reports_refuted ON chain_deposit_reports (created_at)
        WHERE status = 'refuted'
    """,
    """
    CREATE FUNCTION payflow_grant_extra_0013_chain_deposits(app name) RETURNS void
    LANGUAGE plpgsql SECURITY INVOKER
    SET search_path = pg_catalog, public, pg_temp
    AS $$
    BEGIN
        EXECUTE format('REVOKE DELETE, TRUNCATE ON chain_deposits FROM %I', app);
        EXECUTE format('REVOKE DELETE, TRUNCATE ON chain_deposit_reports FROM %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0013_chain_deposits(name) FROM PUBLIC",
]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_extra_0013_chain_deposits(name)",
    "DROP TABLE chain_deposit_reports",
    "DROP TABLE chain_deposits",
    "ALTER TABLE payment_events DROP CONSTRAINT payment_events_type_valid",
    f"""
    ALTER TABLE payment_events ADD CONSTRAINT payment_events_type_valid
        CHECK (event_type IN ({OLD_TYPES}))
    """,
]

LOSES_DATA = """
SELECT EXISTS (SELECT 1 FROM chain_deposits)
    OR EXISTS (SELECT 1 FROM payment_events WHERE event_type = 'deposit_reversal')
"""


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    refuse_data_loss(LOSES_DATA, "chain deposits or deposit reversals")
    execute_all(DOWNGRADE)
