"""Treasury addresses and sweeps between payflow's own accounts.

payflow holds only a watch-only key: owners sweep deposit addresses with their own wallet.
- `treasury_addresses (chain, address)`: the owners' registered treasury addresses, each
  with who added it and when, and who removed it and when (a removed row stays: audit).
- `ledger_accounts.kind` gains `treasury` (per chain, debit-normal: the owners' wallets).
- `ledger_transfers.kind` gains `treasury_sweep` (custody -> treasury, an outflow from a
  deposit address to a treasury address), `treasury_funding` (treasury -> custody, a
  treasury address funding one of payflow's addresses), reference `<tx hash>:<log index>`
  (`-1` for native value), and `sweep_gas` (custody -> network_fees, the gas a deposit
  address paid for the owners' transaction), reference `<tx hash>:gas`.
- `ledger_post_system_transfer(kind, reference, debit, credit, amount)`: one balanced
  transfer between two system accounts, once per (kind, reference).

Revision ID: 0030_treasury_sweeps
Revises: 0029_double_entry_books
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0030_treasury_sweeps"
down_revision = "0029_double_entry_books"
branch_labels = None
depends_on = None

KINDS_0029 = "'custody', 'gateway', 'fees', 'network_fees', 'reorg_loss', 'opening', 'adjustments'"

SYSTEM_TRANSFER_BODY = """
    CREATE OR REPLACE FUNCTION ledger_post_system_transfer(
        p_kind text, p_reference text, p_debit text, p_credit text, p_amount numeric
    ) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_transfer bigint;
    BEGIN
        IF p_amount IS NULL OR p_amount <= 0 THEN
            RAISE EXCEPTION 'a transfer amount must be positive' USING ERRCODE = 'check_violation';
        END IF;
        IF p_debit = p_credit THEN
            RAISE EXCEPTION 'a transfer needs two accounts' USING ERRCODE = 'check_violation';
        END IF;
        INSERT INTO ledger_transfers (kind, reference) VALUES (p_kind, p_reference)
        ON CONFLICT (kind, reference) DO NOTHING
        RETURNING id INTO v_transfer;
        IF v_transfer IS NULL THEN
            RETURN NULL;
        END IF;
        INSERT INTO ledger_legs (transfer_id, ledger_account, amount, kind)
        VALUES (v_transfer, p_debit, -p_amount, p_kind), (v_transfer, p_credit, p_amount, p_kind);
        RETURN v_transfer;
    END
    $$
    """

UPGRADE: list[str] = [
    """
    CREATE TABLE treasury_addresses (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        chain text NOT NULL REFERENCES chains (chain),
        address text NOT NULL
            CONSTRAINT treasury_addresses_address_format CHECK (address ~ '^0x[0-9a-f]{40}$'),
        added_by text NOT NULL CONSTRAINT treasury_addresses_added_by_present
            CHECK (length(added_by) BETWEEN 1 AND 200),
        added_at timestamptz NOT NULL DEFAULT now(),
        removed_by text CONSTRAINT treasury_addresses_removed_by_present
            CHECK (length(removed_by) BETWEEN 1 AND 200),
        removed_at timestamptz,
        CONSTRAINT treasury_addresses_removed_with_who
            CHECK ((removed_at IS NULL) = (removed_by IS NULL))
    )
    """,
    "CREATE UNIQUE INDEX treasury_addresses_active ON treasury_addresses (chain, address)"
    " WHERE removed_at IS NULL",
    f"""
    ALTER TABLE ledger_accounts
        DROP CONSTRAINT ledger_accounts_kind_valid,
        ADD CONSTRAINT ledger_accounts_kind_valid CHECK (kind IN ({KINDS_0029}, 'treasury')),
        DROP CONSTRAINT ledger_accounts_chain_where_needed,
        ADD CONSTRAINT ledger_accounts_chain_where_needed
            CHECK ((kind IN ('custody', 'network_fees', 'treasury')) = (chain IS NOT NULL))
    """,
    """
    ALTER TABLE ledger_transfers
        DROP CONSTRAINT ledger_transfers_kind_valid,
        ADD CONSTRAINT ledger_transfers_kind_valid
            CHECK (kind IN ('opening', 'treasury_sweep', 'treasury_funding', 'sweep_gas'))
    """,
    # A movement between two system accounts: `p_debit` gains (debit, -A), `p_credit`
    # gives (credit, +A); once per (kind, reference): NULL when already posted.
    SYSTEM_TRANSFER_BODY,
    "REVOKE ALL ON FUNCTION ledger_post_system_transfer(text, text, text, text, numeric)"
    " FROM PUBLIC",
    """
    CREATE FUNCTION payflow_grant_extra_0030_treasury_sweeps(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        -- an address is removed by setting removed_at/removed_by, never deleted
        EXECUTE format('REVOKE UPDATE, DELETE ON public.treasury_addresses FROM %I', app);
        EXECUTE format('GRANT UPDATE (removed_by, removed_at) ON public.treasury_addresses'
                       ' TO %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.ledger_post_system_transfer(text,'
                       ' text, text, text, numeric) TO %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0030_treasury_sweeps(name) FROM PUBLIC",
]

# A forced downgrade drops the sweeps (append-only: the guard trigger is off for it) and the
# treasury accounts; the older schema has neither.
DOWNGRADE: list[str] = [
    "ALTER TABLE ledger_legs DISABLE TRIGGER ledger_legs_no_update_delete",
    "ALTER TABLE ledger_transfers DISABLE TRIGGER ledger_transfers_no_update_delete",
    "DELETE FROM ledger_legs l USING ledger_transfers t"
    " WHERE l.transfer_id = t.id AND t.kind IN ('treasury_sweep', 'treasury_funding',"
    " 'sweep_gas')",
    "DELETE FROM ledger_transfers WHERE kind IN ('treasury_sweep', 'treasury_funding',"
    " 'sweep_gas')",
    "DELETE FROM ledger_legs WHERE ledger_account IN"
    " (SELECT code FROM ledger_accounts WHERE kind = 'treasury')",
    "ALTER TABLE ledger_transfers ENABLE TRIGGER ledger_transfers_no_update_delete",
    "ALTER TABLE ledger_legs ENABLE TRIGGER ledger_legs_no_update_delete",
    "DELETE FROM ledger_accounts WHERE kind = 'treasury'",
    "DROP FUNCTION payflow_grant_extra_0030_treasury_sweeps(name)",
    "DROP FUNCTION ledger_post_system_transfer(text, text, text, text, numeric)",
    """
    ALTER TABLE ledger_transfers
        DROP CONSTRAINT ledger_transfers_kind_valid,
        ADD CONSTRAINT ledger_transfers_kind_valid CHECK (kind IN ('opening'))
    """,
    f"""
    ALTER TABLE ledger_accounts
        DROP CONSTRAINT ledger_accounts_kind_valid,
        ADD CONSTRAINT ledger_accounts_kind_valid CHECK (kind IN ({KINDS_0029})),
        DROP CONSTRAINT ledger_accounts_chain_where_needed,
        ADD CONSTRAINT ledger_accounts_chain_where_needed
            CHECK ((kind IN ('custody', 'network_fees')) = (chain IS NOT NULL))
    """,
    "DROP TABLE treasury_addresses",
]

LOSES_DATA = """
SELECT EXISTS (SELECT 1 FROM treasury_addresses)
    OR EXISTS (SELECT 1 FROM ledger_transfers WHERE kind <> 'opening')
    OR EXISTS (SELECT 1 FROM ledger_accounts WHERE kind = 'treasury')
"""


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    refuse_data_loss(LOSES_DATA, "treasury addresses or sweeps between system accounts")
    execute_all(DOWNGRADE)
