"""Three more movements in the books: the gas payflow paid, a reversed deposit's shortfall,
and an operator's adjustment. Each is a balanced `ledger_transfers` posting written by one
SECURITY DEFINER function (owned by the owner role, search path pinned), so they keep
working once the service role can no longer write the journal itself.

* `network_fee` (reference `<chain>:<tx hash>`): `ledger_post_network_fee(chain, tx hash,
  amount)` posts network_fees:<chain>:<native asset> -A, custody:<chain>:<native asset> +A
  for the gas a mined payout transaction paid (gasUsed x effectiveGasPrice), once per
  mined transaction (UNIQUE (kind, reference)); a second call for the same hash posts
  nothing and returns NULL.
* `reorg_shortfall` (reference the reversal's event id `reorg:<transfer id>[~n]`, or that
  id with `:refused` when the reversal's debit itself was refused):
  `ledger_post_reorg_shortfall(reference, transfer id, amount)` posts reorg_loss:<asset> -S,
  custody:<chain>:<asset> +S, so that with the customer's debit the custody account is
  restored by the whole reversed amount and the loss is visible.
* `reorg_recovery` (reference the re-credit's event id `chain:<transfer id>~n`): the same
  transfer mined again and re-credited (the customer gets the amount minus the shortfall)
  takes the loss back, custody -S, reorg_loss +S (`ledger_post_reorg_recovery`).
* `adjustment` (reference the operator's, or a fresh one): `ledger_post_adjustment(...)`
  moves a signed amount between an account (a customer's or merchant's, or a system
  account) and an existing system account of the same asset, refusing a customer balance
  below its held amount, and writes the audit row (`ledger_adjustments`: who, why, when;
  append-only) in the same statement.

Revision ID: 0031_gas_shortfall_adjustments
Revises: 0030_treasury_sweeps
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0031_gas_shortfall_adjustments"
down_revision = "0030_treasury_sweeps"
branch_labels = None
depends_on = None

FUNCTIONS = (
    "ledger_post_network_fee(text, text, numeric)",
    "ledger_post_reorg_shortfall(text, text, numeric)",
    "ledger_post_reorg_recovery(text, text, numeric)",
    "ledger_post_adjustment(text, text, numeric, text, text, text)",
)

KINDS_BEFORE = "('opening', 'treasury_sweep', 'treasury_funding', 'sweep_gas')"
KINDS = (
    "('opening', 'treasury_sweep', 'treasury_funding', 'sweep_gas',"
    " 'network_fee', 'reorg_shortfall', 'reorg_recovery', 'adjustment')"
)

TABLES: list[str] = [
    "ALTER TABLE ledger_transfers DROP CONSTRAINT ledger_transfers_kind_valid",
    f"ALTER TABLE ledger_transfers ADD CONSTRAINT ledger_transfers_kind_valid"
    f" CHECK (kind IN {KINDS})",
    # The audit of every operator adjustment: one row per adjustment transfer, written by
    # ledger_post_adjustment in the statement that posts it; never changed.
    """
    CREATE TABLE ledger_adjustments (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        transfer_id bigint NOT NULL REFERENCES ledger_transfers (id),
        reference text NOT NULL,
        account_id uuid REFERENCES accounts (id),
        ledger_account text REFERENCES ledger_accounts (code),
        against text NOT NULL REFERENCES ledger_accounts (code),
        asset text NOT NULL REFERENCES assets (code),
        amount numeric(78,18) NOT NULL,
        reason text NOT NULL,
        adjusted_by text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT ledger_adjustments_transfer_unique UNIQUE (transfer_id),
        CONSTRAINT ledger_adjustments_reference_unique UNIQUE (reference),
        CONSTRAINT ledger_adjustments_one_account
            CHECK (num_nonnulls(account_id, ledger_account) = 1),
        CONSTRAINT ledger_adjustments_amount_non_zero CHECK (amount <> 0),
        CONSTRAINT ledger_adjustments_reason_length CHECK (length(btrim(reason)) BETWEEN 1 AND 500),
        CONSTRAINT ledger_adjustments_by_length CHECK (length(btrim(adjusted_by)) BETWEEN 1 AND 200)
    )
    """,
    "CREATE TRIGGER ledger_adjustments_no_update_delete BEFORE UPDATE OR DELETE"
    " ON ledger_adjustments FOR EACH ROW EXECUTE FUNCTION ledger_append_only()",
    "CREATE TRIGGER ledger_adjustments_no_truncate BEFORE TRUNCATE ON ledger_adjustments"
    " FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()",
]

POSTING_FUNCTIONS: list[str] = [
    # The gas a mined payout transaction paid, in the chain's native asset.
    """
    CREATE FUNCTION ledger_post_network_fee(p_chain text, p_tx_hash text, p_amount numeric)
    RETURNS bigint
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    DECLARE
        v_asset text;
        v_transfer bigint;
    BEGIN
        IF p_amount IS NULL OR p_amount <= 0 THEN
            RAISE EXCEPTION 'a network fee must be positive' USING ERRCODE = 'check_violation';
        END IF;
        IF p_tx_hash IS NULL OR p_tx_hash !~ '^0x[0-9a-f]{64}$' THEN
            RAISE EXCEPTION 'a network fee names its transaction (0x + 64 lower-case hex)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT c.native_asset INTO v_asset FROM public.chains c WHERE c.chain = p_chain;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'chain % is not registered', p_chain USING ERRCODE = 'no_data_found';
        END IF;
        INSERT INTO public.ledger_transfers (kind, reference)
        VALUES ('network_fee', p_chain || ':' || p_tx_hash)
        ON CONFLICT (kind, reference) DO NOTHING
        RETURNING id INTO v_transfer;
        IF v_transfer IS NULL THEN
            RETURN NULL;  -- this transaction's gas is posted already
        END IF;
        INSERT INTO public.ledger_legs (transfer_id, ledger_account, amount, kind) VALUES
            (v_transfer, public.ledger_account('network_fees', p_chain, v_asset), -p_amount,
             'network_fee'),
            (v_transfer, public.ledger_account('custody', p_chain, v_asset), p_amount,
             'network_fee');
        RETURN v_transfer;
    END
    $$
    """,
    # The part of a reversed deposit the customer's balance no longer covered.
    """
    CREATE FUNCTION ledger_post_reorg_shortfall(
        p_reference text, p_transfer_id text, p_amount numeric
    )
    RETURNS bigint
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    DECLARE
        v_chain text;
        v_asset text;
        v_transfer bigint;
    BEGIN
        IF p_amount IS NULL OR p_amount <= 0 THEN
            RAISE EXCEPTION 'a shortfall must be positive' USING ERRCODE = 'check_violation';
        END IF;
        IF p_reference IS NULL OR p_reference NOT LIKE 'reorg:' || p_transfer_id || '%' THEN
            RAISE EXCEPTION 'a shortfall is referenced by its reversal, reorg:%', p_transfer_id
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT d.chain, d.asset INTO v_chain, v_asset FROM public.chain_deposits d
        WHERE d.transfer_id = p_transfer_id AND d.status = 'reversed';
        IF NOT FOUND THEN
            RAISE EXCEPTION 'deposit % is not reversed', p_transfer_id
                USING ERRCODE = 'no_data_found';
        END IF;
        INSERT INTO public.ledger_transfers (kind, reference)
        VALUES ('reorg_shortfall', p_reference)
        ON CONFLICT (kind, reference) DO NOTHING
        RETURNING id INTO v_transfer;
        IF v_transfer IS NULL THEN
            RETURN NULL;
        END IF;
        INSERT INTO public.ledger_legs (transfer_id, ledger_account, amount, kind) VALUES
            (v_transfer, public.ledger_account('reorg_loss', NULL, v_asset), -p_amount,
             'reorg_shortfall'),
            (v_transfer, public.ledger_account('custody', v_chain, v_asset), p_amount,
             'reorg_shortfall');
        RETURN v_transfer;
    END
    $$
    """,
    # A reversed deposit mined again and re-credited: the shortfall its reversal booked as
    # a loss exists on chain again (the re-credit gives the customer the amount minus it),
    # so the loss is taken back, custody -> reorg_loss, referenced by the credit event id.
    """
    CREATE FUNCTION ledger_post_reorg_recovery(
        p_reference text, p_transfer_id text, p_amount numeric
    )
    RETURNS bigint
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    DECLARE
        v_chain text;
        v_asset text;
        v_transfer bigint;
    BEGIN
        IF p_amount IS NULL OR p_amount <= 0 THEN
            RAISE EXCEPTION 'a recovery must be positive' USING ERRCODE = 'check_violation';
        END IF;
        IF p_reference IS NULL OR p_reference NOT LIKE 'chain:' || p_transfer_id || '~%' THEN
            RAISE EXCEPTION 'a recovery is referenced by its re-credit, chain:%~n', p_transfer_id
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT d.chain, d.asset INTO v_chain, v_asset FROM public.chain_deposits d
        WHERE d.transfer_id = p_transfer_id AND d.status = 'credited';
        IF NOT FOUND THEN
            RAISE EXCEPTION 'deposit % is not credited', p_transfer_id
                USING ERRCODE = 'no_data_found';
        END IF;
        INSERT INTO public.ledger_transfers (kind, reference)
        VALUES ('reorg_recovery', p_reference)
        ON CONFLICT (kind, reference) DO NOTHING
        RETURNING id INTO v_transfer;
        IF v_transfer IS NULL THEN
            RETURN NULL;
        END IF;
        INSERT INTO public.ledger_legs (transfer_id, ledger_account, amount, kind) VALUES
            (v_transfer, public.ledger_account('custody', v_chain, v_asset), -p_amount,
             'reorg_recovery'),
            (v_transfer, public.ledger_account('reorg_loss', NULL, v_asset), p_amount,
             'reorg_recovery');
        RETURN v_transfer;
    END
    $$
    """,
    # An operator's correction: p_amount is the change of p_account's balance on its normal
    # side (a customer's or merchant's account: credit; a system account: its own), the
    # opposite leg on p_against, an existing system account of the same asset. A reference
    # used before returns that adjustment (created false) when it is the same one, and is
    # refused when it is not.
    """
    CREATE FUNCTION ledger_post_adjustment(
        p_account text, p_against text, p_amount numeric, p_reason text, p_by text,
        p_reference text
    )
    RETURNS TABLE (transfer_id bigint, created boolean)
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    DECLARE
        v_customer uuid;
        v_code text;
        v_asset text;
        v_side text;
        v_against_asset text;
        v_leg numeric;
        v_transfer bigint;
        v_balance numeric;
        v_held numeric;
        v_prior record;
    BEGIN
        IF p_amount IS NULL OR p_amount = 0 THEN
            RAISE EXCEPTION 'the amount must be a non-zero decimal'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF coalesce(length(btrim(p_reason)), 0) NOT BETWEEN 1 AND 500 THEN
            RAISE EXCEPTION 'a reason is required (at most 500 characters)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF coalesce(length(btrim(p_by)), 0) NOT BETWEEN 1 AND 200 THEN
            RAISE EXCEPTION 'who adjusts is required (at most 200 characters)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF coalesce(length(p_reference), 0) NOT BETWEEN 1 AND 200 THEN
            RAISE EXCEPTION 'the reference must be 1 to 200 characters'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT s.asset INTO v_against_asset FROM public.ledger_accounts s
        WHERE s.code = p_against;
        IF NOT FOUND THEN
            RAISE EXCEPTION '% is not a system account', p_against
                USING ERRCODE = 'no_data_found';
        END IF;
        IF p_account ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
            v_customer := p_account::uuid;
            SELECT a.asset INTO v_asset FROM public.accounts a WHERE a.id = v_customer;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'account % does not exist', p_account
                    USING ERRCODE = 'no_data_found';
            END IF;
            v_leg := p_amount;  -- a customer account is credit-normal
        ELSE
            SELECT s.code, s.asset, s.normal_side INTO v_code, v_asset, v_side
            FROM public.ledger_accounts s WHERE s.code = p_account;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'account % does not exist', p_account
                    USING ERRCODE = 'no_data_found';
            END IF;
            IF v_code = p_against THEN
                RAISE EXCEPTION 'an adjustment needs two different accounts'
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            v_leg := CASE WHEN v_side = 'credit' THEN p_amount ELSE -p_amount END;
        END IF;
        IF v_asset <> v_against_asset THEN
            RAISE EXCEPTION 'assets differ: % is %, % is %', p_account, v_asset, p_against,
                v_against_asset USING ERRCODE = 'check_violation';
        END IF;

        INSERT INTO public.ledger_transfers (kind, reference)
        VALUES ('adjustment', p_reference)
        ON CONFLICT (kind, reference) DO NOTHING
        RETURNING id INTO v_transfer;
        IF v_transfer IS NULL THEN
            SELECT j.transfer_id, j.account_id, j.ledger_account, j.against, j.amount
            INTO v_prior FROM public.ledger_adjustments j WHERE j.reference = p_reference;
            IF v_prior.transfer_id IS NULL
               OR v_prior.account_id IS DISTINCT FROM v_customer
               OR v_prior.ledger_account IS DISTINCT FROM v_code
               OR v_prior.against <> p_against OR v_prior.amount <> p_amount THEN
                RAISE EXCEPTION 'reference % was used by a different adjustment', p_reference
                    USING ERRCODE = 'unique_violation';
            END IF;
            RETURN QUERY SELECT v_prior.transfer_id, false;
            RETURN;
        END IF;

        IF v_customer IS NOT NULL THEN
            UPDATE public.accounts SET balance = balance + v_leg, updated_at = now()
            WHERE id = v_customer AND balance + v_leg >= held AND balance + v_leg >= 0
            RETURNING balance INTO v_balance;
            IF NOT FOUND THEN
                SELECT a.balance, a.held INTO v_balance, v_held FROM public.accounts a
                WHERE a.id = v_customer;
                RAISE EXCEPTION 'refused: account % would hold % with % held',
                    p_account, v_balance + v_leg, v_held USING ERRCODE = 'check_violation';
            END IF;
        END IF;
        INSERT INTO public.ledger_legs (transfer_id, account_id, ledger_account, amount, kind)
        VALUES (v_transfer, v_customer, v_code, v_leg, 'adjustment'),
               (v_transfer, NULL, p_against, -v_leg, 'adjustment');
        INSERT INTO public.ledger_adjustments
            (transfer_id, reference, account_id, ledger_account, against, asset, amount,
             reason, adjusted_by)
        VALUES (v_transfer, p_reference, v_customer, v_code, p_against, v_asset, p_amount,
                btrim(p_reason), btrim(p_by));
        RETURN QUERY SELECT v_transfer, true;
    END
    $$
    """,
]

GRANTS: list[str] = [
    *(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC" for signature in FUNCTIONS),
    """
    CREATE FUNCTION payflow_grant_extra_0031_gas_shortfall_adjustments(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        -- The audit is written by ledger_post_adjustment only, and never changed.
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON public.ledger_adjustments'
                       ' FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION'
                       ' public.ledger_post_network_fee(text, text, numeric),'
                       ' public.ledger_post_reorg_shortfall(text, text, numeric),'
                       ' public.ledger_post_reorg_recovery(text, text, numeric),'
                       ' public.ledger_post_adjustment(text, text, numeric, text, text, text)'
                       ' TO %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0031_gas_shortfall_adjustments(name) FROM PUBLIC",
]

UPGRADE: list[str] = [*TABLES, *POSTING_FUNCTIONS, *GRANTS]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_extra_0031_gas_shortfall_adjustments(name)",
    *(f"DROP FUNCTION {signature}" for signature in FUNCTIONS),
    "DROP TABLE ledger_adjustments",
    "ALTER TABLE ledger_transfers DROP CONSTRAINT ledger_transfers_kind_valid",
    f"ALTER TABLE ledger_transfers ADD CONSTRAINT ledger_transfers_kind_valid"
    f" CHECK (kind IN {KINDS_BEFORE})",
]

# The older kinds' CHECK cannot hold these transfers, and the journal is append-only.
LOSES_DATA = """
SELECT EXISTS (
    SELECT 1 FROM ledger_transfers
    WHERE kind IN ('network_fee', 'reorg_shortfall', 'reorg_recovery', 'adjustment')
)
"""


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    refuse_data_loss(LOSES_DATA, "gas, reorg shortfall and adjustment transfers")
    execute_all(DOWNGRADE)
