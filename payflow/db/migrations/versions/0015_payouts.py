"""On-chain payouts: holds, hot-wallet nonces, signed transactions.

- `accounts.held`: the sum of open payout holds. `available = balance - held`, never
  negative: `accounts_held_within_balance CHECK (held <= balance)`; the posting guard
  (`apply_balance_change`) refuses a debit that would dip into held funds.
- `hot_wallets (chain, address, next_nonce)`: the nonce is allocated here, in the
  transaction that stores the signed raw transaction (`payout_txs`), before broadcast.
- `payouts`: one row per payout with its state (held, signed, sent, confirmed, failed)
  and what landed (hash, receipt status, block, fee paid).
- `payout_txs`: every signed transaction of a payout (attempt 1, then fee bumps, all
  with the payout's one nonce); the raw bytes are kept to rebroadcast them unchanged.

The service role may not delete payouts or their transactions (`payflow_grant_extra_0015`)
and updates only `accounts.held` besides the columns 0009 grants.

Revision ID: 0015_payouts
Revises: 0014_chain_scanner
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0015_payouts"
down_revision = "0014_chain_scanner"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    """
    ALTER TABLE accounts
        ADD COLUMN held NUMERIC(78,18) NOT NULL DEFAULT 0
            CONSTRAINT accounts_held_non_negative CHECK (held >= 0),
        ADD CONSTRAINT accounts_held_within_balance CHECK (held <= balance)
    """,
    """
    CREATE TABLE hot_wallets (
        chain TEXT NOT NULL REFERENCES chains (chain),
        address TEXT NOT NULL
            CONSTRAINT hot_wallets_address_format CHECK (address ~ '^0x[0-9a-f]{40}$'),
        next_nonce BIGINT NOT NULL CONSTRAINT hot_wallets_nonce_non_negative
            CHECK (next_nonce >= 0),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        CONSTRAINT hot_wallets_pkey PRIMARY KEY (chain, address)
    )
    """,
    """
    CREATE TABLE payouts (
        id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
        merchant_id UUID NOT NULL,
        idempotency_key TEXT NOT NULL,
        account_id UUID NOT NULL REFERENCES accounts (id),
        asset TEXT NOT NULL REFERENCES assets (code),
        chain TEXT NOT NULL REFERENCES chains (chain),
        to_address TEXT NOT NULL
            CONSTRAINT payouts_to_address_format CHECK (to_address ~ '^0x[0-9a-f]{40}$'),
        contract TEXT CONSTRAINT payouts_contract_format CHECK (contract ~ '^0x[0-9a-f]{40}$'),
        decimals SMALLINT NOT NULL CONSTRAINT payouts_decimals_range
            CHECK (decimals BETWEEN 0 AND 18),
        amount NUMERIC(38,18) NOT NULL CONSTRAINT payouts_amount_positive CHECK (amount > 0),
        fee_hold NUMERIC(38,18) NOT NULL CONSTRAINT payouts_fee_hold_non_negative
            CHECK (fee_hold >= 0),
        status TEXT NOT NULL DEFAULT 'held' CONSTRAINT payouts_status_valid
            CHECK (status IN ('held', 'signed', 'sent', 'confirmed', 'failed')),
        hot_wallet TEXT,
        nonce BIGINT,
        landed_tx_hash TEXT,
        receipt_status SMALLINT CONSTRAINT payouts_receipt_status_valid
            CHECK (receipt_status IN (0, 1)),
        block_number BIGINT,
        block_hash TEXT,
        fee_paid NUMERIC(38,18) CONSTRAINT payouts_fee_paid_non_negative CHECK (fee_paid >= 0),
        wait_reason TEXT,
        failure TEXT,
        trace_id TEXT,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        signed_at TIMESTAMPTZ,
        sent_at TIMESTAMPTZ,
        finalized_at TIMESTAMPTZ,
        CONSTRAINT payouts_idempotency_unique UNIQUE (merchant_id, idempotency_key),
        CONSTRAINT payouts_nonce_unique UNIQUE (chain, hot_wallet, nonce),
        CONSTRAINT payouts_signed_has_nonce
            CHECK (status = 'held' OR (hot_wallet IS NOT NULL AND nonce IS NOT NULL)),
        CONSTRAINT payouts_final_has_time
            CHECK ((status IN ('confirmed', 'failed')) = (finalized_at IS NOT NULL))
    )
    """,
    "CREATE INDEX payouts_open ON payouts (created_at) WHERE status IN ('held', 'signed', 'sent')",
    "CREATE INDEX payouts_account ON payouts (account_id, created_at)",
    """
    CREATE TABLE payout_txs (
        payout_id UUID NOT NULL REFERENCES payouts (id),
        attempt INTEGER NOT NULL CONSTRAINT payout_txs_attempt_positive CHECK (attempt >= 1),
        chain TEXT NOT NULL,
        hot_wallet TEXT NOT NULL,
        nonce BIGINT NOT NULL,
        tx_hash TEXT NOT NULL
            CONSTRAINT payout_txs_hash_format CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
        raw_tx TEXT NOT NULL,
        gas_limit BIGINT NOT NULL,
        max_fee_per_gas NUMERIC(78,0) NOT NULL,
        max_priority_fee_per_gas NUMERIC(78,0) NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        broadcast_at TIMESTAMPTZ,
        CONSTRAINT payout_txs_pkey PRIMARY KEY (payout_id, attempt),
        CONSTRAINT payout_txs_hash_unique UNIQUE (tx_hash)
    )
    """,
    """
    CREATE FUNCTION payflow_grant_extra_0015_payouts(app name) RETURNS void
    LANGUAGE plpgsql SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        EXECUTE format('GRANT UPDATE (held) ON public.accounts TO %I', app);
        EXECUTE format('REVOKE DELETE ON public.payouts, public.payout_txs, public.hot_wallets'
                       ' FROM %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0015_payouts(name) FROM PUBLIC",
]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_extra_0015_payouts(name)",
    "DROP TABLE payout_txs",
    "DROP TABLE payouts",
    "DROP TABLE hot_wallets",
    "ALTER TABLE accounts DROP CONSTRAINT accounts_held_within_balance, DROP COLUMN held",
]


def upgrade() -> None:
    execute_all(UPGRADE)


# Data a downgrade would lose: payouts (with their signed transactions and nonces) and
# open holds (dropping `held` would make held funds spendable).
LOSES_DATA = """
SELECT EXISTS (SELECT 1 FROM payouts) OR EXISTS (SELECT 1 FROM hot_wallets)
    OR EXISTS (SELECT 1 FROM accounts WHERE held <> 0)
"""


def downgrade() -> None:
    refuse_data_loss(LOSES_DATA, "payouts, hot-wallet nonces or open holds")
    execute_all(DOWNGRADE)
