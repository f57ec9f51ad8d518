"""Chain truth: scanner cursor and derived deposit addresses.

- `chain_scanner_cursors`: per chain, the last block the scanner walked (number + hash).
  It moves only by compare-and-set (from the number and hash a walk started at), in the
  transaction that records that walk's observations, so two replicas never both commit
  the same step.
- `chain_scanner_blocks`: the hashes (and parent hashes) of the recently walked blocks,
  to find the fork point after a reorg without asking the node about our own past.
  Pruned below the finalized height minus a margin.
- `deposit_address_counters`: per chain, the next child index of `ETH_DEPOSIT_XPUB`
  (m/44'/60'/0'/0/i). Allocated with `UPDATE … RETURNING` in the same transaction as
  the address's insert: concurrent requests serialise on the row and get distinct
  indexes; a rolled-back request gives its index back.
- `deposit_addresses.derivation_index`: the child index of a derived address (NULL for
  an imported one), unique per chain.

The service role may not DELETE the counters nor the cursors
(hook `payflow_grant_extra_0014_chain_scanner`); it prunes `chain_scanner_blocks`.

Revision ID: 0014_chain_scanner
Revises: 0013_chain_deposits
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0014_chain_scanner"
down_revision = "0013_chain_deposits"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    """
    CREATE TABLE chain_scanner_cursors (
        chain TEXT PRIMARY KEY CONSTRAINT chain_scanner_cursors_chain_format
            CHECK (chain ~ '^[A-Z0-9_]{2,40}$'),
        block_number BIGINT NOT NULL CONSTRAINT chain_scanner_cursors_number_range
            CHECK (block_number >= 0),
        block_hash TEXT NOT NULL CONSTRAINT chain_scanner_cursors_hash_format
            CHECK (block_hash ~ '^0x[0-9a-f]{64}$'),
        reorgs BIGINT NOT NULL DEFAULT 0,
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE chain_scanner_blocks (
        chain TEXT NOT NULL,
        block_number BIGINT NOT NULL,
        block_hash TEXT NOT NULL CONSTRAINT chain_scanner_blocks_hash_format
            CHECK (block_hash ~ '^0x[0-9a-f]{64}$'),
        parent_hash TEXT NOT NULL CONSTRAINT chain_scanner_blocks_parent_format
            CHECK (parent_hash ~ '^0x[0-9a-f]{64}$'),
        CONSTRAINT chain_scanner_blocks_pkey PRIMARY KEY (chain, block_number)
    )
    """,
    """
    CREATE TABLE deposit_address_counters (
        chain TEXT PRIMARY KEY CONSTRAINT deposit_address_counters_chain_format
            CHECK (chain ~ '^[A-Z0-9_]{2,40}$'),
        next_index BIGINT NOT NULL DEFAULT 0
            CONSTRAINT deposit_address_counters_index_range
            CHECK (next_index >= 0 AND next_index < 2147483648)
    )
    """,
    """
    ALTER TABLE deposit_addresses ADD COLUMN derivation_index BIGINT
        CONSTRAINT deposit_addresses_derivation_index_range
        CHECK (derivation_index >= 0 AND derivation_index < 2147483648)
    """,
    """
    ALTER TABLE deposit_addresses ADD CONSTRAINT deposit_addresses_derivation_unique
        UNIQUE (chain, derivation_index)
    """,
    """
    CREATE FUNCTION payflow_grant_extra_0014_chain_scanner(app name) RETURNS void
    LANGUAGE plpgsql SECURITY INVOKER
    SET search_path = pg_catalog, public, pg_temp
    AS $$
    BEGIN
        EXECUTE format('REVOKE DELETE, TRUNCATE ON chain_scanner_cursors FROM %I', app);
        EXECUTE format('REVOKE DELETE, TRUNCATE ON deposit_address_counters FROM %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0014_chain_scanner(name) FROM PUBLIC",
]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_extra_0014_chain_scanner(name)",
    "ALTER TABLE deposit_addresses DROP CONSTRAINT deposit_addresses_derivation_unique",
    "ALTER TABLE deposit_addresses DROP COLUMN derivation_index",
    "DROP TABLE deposit_address_counters",
    "DROP TABLE chain_scanner_blocks",
    "DROP TABLE chain_scanner_cursors",
]

LOSES_DATA = """
SELECT EXISTS (SELECT 1 FROM deposit_addresses WHERE derivation_index IS NOT NULL)
    OR EXISTS (SELECT 1 FROM deposit_address_counters)
"""


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    refuse_data_loss(LOSES_DATA, "derived deposit addresses and their index counters")
    execute_all(DOWNGRADE)
