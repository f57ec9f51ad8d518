-- The ledger's SQL functions as they are at the head revision (payflow/db/functions.py).
-- Migrations are their history; each statement below is PostgreSQL's own definition,
-- rewritten by `uv run python -m payflow.db.schema` (the comments stay as written).

-- name: balance_events_append_only
-- Trigger function of balance_events (migration 0001): UPDATE, DELETE and TRUNCATE of the
-- append-only ledger raise insufficient_privilege, whoever runs them.
CREATE OR REPLACE FUNCTION public.balance_events_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
    BEGIN
        RAISE EXCEPTION 'balance_events is append-only: % refused', TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END
    $function$;

-- name: ledger_account
-- The code of payflow's own account of a kind, chain (custody and network fees only) and
-- asset, e.g. custody:ETH_MAINNET:USDC (migration 0029); created when missing, so a new
-- asset, chain or token has its accounts at its first posting.
CREATE OR REPLACE FUNCTION public.ledger_account(p_kind text, p_chain text, p_asset text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    DECLARE
        v_code text := p_kind || ':' || coalesce(p_chain || ':', '') || p_asset;
    BEGIN
        PERFORM 1 FROM ledger_accounts WHERE code = v_code;
        IF NOT FOUND THEN
            INSERT INTO ledger_accounts (code, kind, chain, asset, normal_side)
            VALUES (v_code, p_kind, p_chain, p_asset,
                    CASE WHEN p_kind = 'fees' THEN 'credit' ELSE 'debit' END)
            ON CONFLICT (code) DO NOTHING;
        END IF;
        RETURN v_code;
    END
    $function$;

-- name: ledger_append_only
-- Trigger function of ledger_legs and ledger_transfers (migration 0029): UPDATE, DELETE
-- and TRUNCATE of the append-only books raise insufficient_privilege, whoever runs them.
CREATE OR REPLACE FUNCTION public.ledger_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END
    $function$;

-- name: ledger_counterparty
-- The system account on the other side of a payment event's customer leg (migration
-- 0029): gateway:<asset> for payment_credit, fees:<asset> for withdrawal_fee, and for
-- deposits, airdrops, reversals and withdrawals custody:<chain>:<asset> with the chain of
-- the chain_deposits or payouts row the event id names, else custody:external:<asset>.
CREATE OR REPLACE FUNCTION public.ledger_counterparty(p_event_id text, p_type text, p_asset text)
 RETURNS text
 LANGUAGE plpgsql
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    DECLARE
        v_chain text;
    BEGIN
        CASE p_type
        WHEN 'payment_credit' THEN
            RETURN ledger_account('gateway', NULL, p_asset);
        WHEN 'withdrawal_fee' THEN
            RETURN ledger_account('fees', NULL, p_asset);
        WHEN 'deposit', 'airdrop', 'deposit_reversal' THEN
            IF p_event_id LIKE 'chain:%' OR p_event_id LIKE 'reorg:%' THEN
                SELECT d.chain INTO v_chain FROM chain_deposits d
                WHERE d.transfer_id = split_part(substr(p_event_id, 7), '~', 1);
            END IF;
        WHEN 'withdrawal' THEN
            IF p_event_id ~ '^po:[0-9a-f-]{36}$' THEN
                SELECT p.chain INTO v_chain FROM payouts p
                WHERE p.id = substr(p_event_id, 4)::uuid;
            END IF;
        ELSE
            RAISE EXCEPTION 'event type % has no counterparty account', p_type
                USING ERRCODE = 'check_violation';
        END CASE;
        RETURN ledger_account('custody', coalesce(v_chain, 'external'), p_asset);
    END
    $function$;

-- name: ledger_post_opening
-- An opening balance as the transfer opening:<asset> -> account, once per account
-- (migration 0029): the transfer, both legs and the balance change; returns the balance.
CREATE OR REPLACE FUNCTION public.ledger_post_opening(p_account uuid, p_amount numeric)
 RETURNS numeric
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    DECLARE
        v_transfer bigint;
        v_asset text;
        v_balance numeric;
    BEGIN
        IF p_account IS NULL OR p_amount IS NULL OR p_amount <= 0 THEN
            RAISE EXCEPTION 'an opening balance must be positive'
                USING ERRCODE = 'check_violation';
        END IF;
        INSERT INTO ledger_transfers (kind, reference) VALUES ('opening', p_account::text)
        RETURNING id INTO v_transfer;
        UPDATE accounts SET balance = balance + p_amount, initial_balance = p_amount,
                            updated_at = now()
        WHERE id = p_account
        RETURNING asset, balance INTO v_asset, v_balance;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'account % does not exist', p_account USING ERRCODE = 'no_data_found';
        END IF;
        INSERT INTO ledger_legs (transfer_id, account_id, amount, kind)
        VALUES (v_transfer, p_account, p_amount, 'opening');
        INSERT INTO ledger_legs (transfer_id, ledger_account, amount, kind)
        VALUES (v_transfer, ledger_account('opening', NULL, v_asset), -p_amount, 'opening');
        RETURN v_balance;
    END
    $function$;

-- name: ledger_posting_balanced
-- Deferred constraint trigger function of balance_events and ledger_legs (migration 0029):
-- at commit the posting of each inserted leg (a payment event or a transfer) must sum to
-- zero per asset and name known accounts, or check_violation (ledger_posting_balanced).
CREATE OR REPLACE FUNCTION public.ledger_posting_balanced()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    DECLARE
        v_event text := NEW.source_event_id;
        v_transfer bigint;
        v_asset text;
        v_total numeric;
    BEGIN
        IF TG_TABLE_NAME = 'ledger_legs' THEN
            v_transfer := NEW.transfer_id;
        END IF;
        -- Each leg's asset by a key lookup (a subquery per leg, never a join the planner
        -- could hash over the whole accounts table while its statistics are empty).
        IF v_transfer IS NULL THEN
            SELECT g.asset, g.total INTO v_asset, v_total FROM (
                SELECT j.asset, sum(j.amount) AS total FROM (
                    SELECT (SELECT a.asset FROM accounts a WHERE a.id = b.account_id) AS asset,
                           b.amount
                    FROM balance_events b WHERE b.source_event_id = v_event
                    UNION ALL
                    SELECT coalesce(
                               (SELECT s.asset FROM ledger_accounts s
                                WHERE s.code = l.ledger_account),
                               (SELECT c.asset FROM accounts c WHERE c.id = l.account_id)),
                           l.amount
                    FROM ledger_legs l WHERE l.source_event_id = v_event
                ) j GROUP BY j.asset
            ) g WHERE g.asset IS NULL OR g.total <> 0 ORDER BY g.asset NULLS FIRST LIMIT 1;
        ELSE
            SELECT g.asset, g.total INTO v_asset, v_total FROM (
                SELECT j.asset, sum(j.amount) AS total FROM (
                    SELECT coalesce(
                               (SELECT s.asset FROM ledger_accounts s
                                WHERE s.code = l.ledger_account),
                               (SELECT c.asset FROM accounts c WHERE c.id = l.account_id))
                               AS asset,
                           l.amount
                    FROM ledger_legs l WHERE l.transfer_id = v_transfer
                ) j GROUP BY j.asset
            ) g WHERE g.asset IS NULL OR g.total <> 0 ORDER BY g.asset NULLS FIRST LIMIT 1;
        END IF;
        IF FOUND THEN
            RAISE EXCEPTION 'unbalanced posting %: %',
                coalesce('event ' || v_event, 'transfer ' || v_transfer),
                CASE WHEN v_asset IS NULL THEN 'a leg names an unknown account'
                     ELSE format('its %s legs sum to %s, not 0', v_asset, v_total) END
                USING ERRCODE = 'check_violation', CONSTRAINT = 'ledger_posting_balanced',
                      TABLE = TG_TABLE_NAME;
        END IF;
        RETURN NULL;
    END
    $function$;

-- name: cleanup_processed_events
-- Deletes posting claims (processed_events) older than min_age_days (clamped up to 14),
-- oldest first, at most batch_size (clamped to [1, 10000]) rows; returns how many. The
-- only way the service role removes a claim (SECURITY DEFINER, migration 0009).
CREATE OR REPLACE FUNCTION public.cleanup_processed_events(min_age_days integer, batch_size integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    DECLARE
        age_days integer := greatest(coalesce(min_age_days, 14),
                                     14);
        batch integer := least(greatest(coalesce(batch_size, 1000), 1), 10000);
        deleted integer;
    BEGIN
        -- Only terminal outcomes of terminal (or vanished) events, old enough that no
        -- delivery of them can still be in flight; never a 'pending' claim.
        WITH doomed AS (
            SELECT p.idempotency_key
            FROM public.processed_events p
            WHERE p.outcome <> 'pending'
              AND p.created_at < pg_catalog.now() - pg_catalog.make_interval(days => age_days)
              AND NOT EXISTS (
                  SELECT 1 FROM public.payment_events e
                  WHERE e.event_id = p.event_id AND e.status NOT IN ('confirmed', 'failed')
              )
            ORDER BY p.created_at
            LIMIT batch
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM public.processed_events p
        USING doomed d
        WHERE p.idempotency_key = d.idempotency_key;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        RETURN deleted;
    END
    $function$;

-- name: ledger_post_success
-- The success path of payflow.ledger.posting in one statement (migration 0020): claim the
-- key with outcome success, move the event to confirmed from p_sources, change the balance
-- under the posting guard and append the ledger row. NULL when the key is claimed already;
-- SQLSTATE PF001 (nothing written) when the caller must take the full path.
CREATE OR REPLACE FUNCTION public.ledger_post_success(p_key text, p_event_id text, p_sources text[], p_credit_types text[], p_active_types text[], p_lock_timeout_ms integer)
 RETURNS numeric
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    DECLARE
        v_account uuid;
        v_amount numeric;
        v_type text;
        v_delta numeric;
        v_balance numeric;
        v_counterparty text;
    BEGIN
        -- A privilege boundary: the caller's arguments are checked, never trusted.
        IF p_event_id IS NULL OR p_key IS DISTINCT FROM ledger_posting_key(p_event_id) THEN
            RAISE EXCEPTION 'ledger_post_success: the key is not the posting key of event %',
                p_event_id USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_sources IS NULL OR NOT p_sources <@ ARRAY['enqueued', 'pending', 'processing']::text[]
           OR array_position(p_sources, NULL) IS NOT NULL THEN
            RAISE EXCEPTION 'ledger_post_success: an event is confirmed only from an open status'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_credit_types IS NULL OR NOT (p_credit_types @> ARRAY['airdrop', 'deposit', 'payment_credit']::text[]
                                          AND p_credit_types <@ ARRAY['airdrop', 'deposit', 'payment_credit']::text[]) THEN
            RAISE EXCEPTION 'ledger_post_success: the credit types are not %',
                ARRAY['airdrop', 'deposit', 'payment_credit']::text[] USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_active_types IS NULL OR NOT p_active_types @> ARRAY['withdrawal', 'withdrawal_fee']::text[] THEN
            RAISE EXCEPTION 'ledger_post_success: a frozen account refuses at least %',
                ARRAY['withdrawal', 'withdrawal_fee']::text[] USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_lock_timeout_ms IS NULL OR p_lock_timeout_ms NOT BETWEEN 0 AND 3600000 THEN
            RAISE EXCEPTION 'ledger_post_success: lock timeout % ms out of range',
                p_lock_timeout_ms USING ERRCODE = 'invalid_parameter_value';
        END IF;

        -- Local to the statement's own transaction: waits on the claim, the event and the
        -- account are bounded like any payflow transaction's.
        PERFORM pg_catalog.set_config('lock_timeout', p_lock_timeout_ms::text, true);

        INSERT INTO processed_events (idempotency_key, event_id, outcome)
        VALUES (p_key, p_event_id, 'success')
        ON CONFLICT (idempotency_key) DO NOTHING;
        IF NOT FOUND THEN
            RETURN NULL;  -- posted (or being posted) by another delivery: nothing written
        END IF;

        UPDATE payment_events SET status = 'confirmed', updated_at = now()
        WHERE event_id = p_event_id AND status = ANY (p_sources)
        RETURNING account_id, amount, event_type INTO v_account, v_amount, v_type;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'event % cannot be confirmed here', p_event_id
                USING ERRCODE = 'PF001';
        END IF;

        -- The other side of the posting: a system account, which keeps no balance row.
        v_counterparty := ledger_counterparty(
            p_event_id, v_type, (SELECT a.asset FROM accounts a WHERE a.id = v_account));

        -- The sign comes from the event type (checked equal to the caller's list above).
        v_delta := CASE WHEN v_type = ANY (ARRAY['airdrop', 'deposit', 'payment_credit']::text[]) THEN v_amount
                        ELSE -v_amount END;
        UPDATE accounts
        SET balance = balance + v_delta, updated_at = now()
        WHERE id = v_account
          AND balance + v_delta >= held
          AND (NOT (v_type = ANY (p_active_types)) OR status = 'active')
        RETURNING balance INTO v_balance;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'event %: the balance change is refused', p_event_id
                USING ERRCODE = 'PF001';
        END IF;

        INSERT INTO balance_events (account_id, amount, event_type, source_event_id,
                                    balance_after)
        VALUES (v_account, v_delta, v_type, p_event_id, v_balance);
        INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind)
        VALUES (p_event_id, v_counterparty, -v_delta, v_type);
        RETURN v_balance;
    END
    $function$;

-- name: ledger_post_system_transfer
-- A movement between two system accounts (migration 0031: treasury sweeps and fundings),
-- once per (kind, reference); NULL when already posted.
CREATE OR REPLACE FUNCTION public.ledger_post_system_transfer(p_kind text, p_reference text, p_debit text, p_credit text, p_amount numeric)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    DECLARE
        v_transfer bigint;
    BEGIN
        IF p_kind IS NULL OR p_kind NOT IN ('treasury_sweep', 'treasury_funding', 'sweep_gas')
        THEN
            RAISE EXCEPTION 'a system transfer is a treasury sweep, funding or sweep gas'
                USING ERRCODE = 'check_violation';
        END IF;
        IF p_amount IS NULL OR p_amount <= 0 THEN
            RAISE EXCEPTION 'a transfer amount must be positive' USING ERRCODE = 'check_violation';
        END IF;
        IF p_debit IS NULL OR p_credit IS NULL OR p_debit = p_credit THEN
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
    $function$;

-- name: ledger_post_network_fee
-- The gas a mined payout transaction paid (migration 0031): network_fees -> custody of the
-- chain's native asset, a transfer `network_fee` referenced `<chain>:<tx hash>`, once per
-- mined transaction; NULL when posted already.
CREATE OR REPLACE FUNCTION public.ledger_post_network_fee(p_chain text, p_tx_hash text, p_amount numeric)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;

-- name: ledger_post_reorg_shortfall
-- The part of a reversed deposit its customer already spent (migration 0031):
-- reorg_loss -> custody of the deposit's chain, a transfer `reorg_shortfall` referenced by
-- the reversal's event id; NULL when posted already.
CREATE OR REPLACE FUNCTION public.ledger_post_reorg_shortfall(p_reference text, p_transfer_id text, p_amount numeric)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;

-- name: ledger_post_reorg_recovery
-- A reversed deposit mined again and re-credited (migration 0031): the loss its reversal
-- booked is taken back, custody -> reorg_loss, a transfer `reorg_recovery` referenced by
-- the re-credit's event id; NULL when posted already.
CREATE OR REPLACE FUNCTION public.ledger_post_reorg_recovery(p_reference text, p_transfer_id text, p_amount numeric)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;

-- name: ledger_post_adjustment
-- An operator adjustment (migration 0031): a transfer `adjustment` between an account (a
-- customer's, a merchant's or a system account) and a system account of the same asset,
-- with its audit row in ledger_adjustments; refused below the held amount; a reference
-- used before returns that adjustment (created false), or is refused for another one.
CREATE OR REPLACE FUNCTION public.ledger_post_adjustment(p_account text, p_against text, p_amount numeric, p_reason text, p_by text, p_reference text)
 RETURNS TABLE(transfer_id bigint, created boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;

-- name: ledger_posting_key
-- payflow.idempotency.idempotency_key('ledger.post', event id) computed by the server
-- (migration 0032): the definer posting functions accept no other key for an event.
CREATE OR REPLACE FUNCTION public.ledger_posting_key(p_event_id text)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE STRICT
AS $function$
        SELECT pg_catalog.encode(pg_catalog.sha256(
            pg_catalog.int8send(2) OPERATOR(pg_catalog.||) pg_catalog.int8send(11)
            OPERATOR(pg_catalog.||) pg_catalog.convert_to('ledger.post', 'UTF8')
            OPERATOR(pg_catalog.||) pg_catalog.int8send(pg_catalog.octet_length(
                   pg_catalog.convert_to(p_event_id, 'UTF8')))
            OPERATOR(pg_catalog.||) pg_catalog.convert_to(p_event_id, 'UTF8')), 'hex')
    $function$;

-- name: ledger_apply_balance_change
-- The full path's guarded balance change with its customer leg and counterparty leg
-- (migration 0032, SECURITY DEFINER: the service role cannot write the journal or a
-- balance itself). The account, signed amount and type must be the event's own and the
-- event being posted under its claim; NULL when the guard refuses (nothing written).
CREATE OR REPLACE FUNCTION public.ledger_apply_balance_change(p_account uuid, p_delta numeric, p_type text, p_event_id text, p_active_only boolean)
 RETURNS numeric
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    DECLARE
        v_event record;
        v_expected numeric;
        v_asset text;
        v_counterparty text;
        v_balance numeric;
    BEGIN
        IF p_account IS NULL OR p_delta IS NULL OR p_type IS NULL OR p_event_id IS NULL
           OR p_active_only IS NULL THEN
            RAISE EXCEPTION 'ledger_apply_balance_change: every argument is required'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT e.account_id, e.amount, e.event_type, e.status INTO v_event
        FROM payment_events e WHERE e.event_id = p_event_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'ledger_apply_balance_change: event % does not exist', p_event_id
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- The posting is the event's own: its account, its type, its amount with the sign
        -- its type gives (a credit only for the credit types).
        v_expected := CASE WHEN p_type = ANY (ARRAY['airdrop', 'deposit', 'payment_credit']::text[]) THEN v_event.amount
                           ELSE -v_event.amount END;
        IF v_event.account_id <> p_account OR v_event.event_type <> p_type
           OR v_event.amount <= 0 OR p_delta <> v_expected THEN
            RAISE EXCEPTION 'ledger_apply_balance_change: % % on account % is not event %',
                p_type, p_delta, p_account, p_event_id
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- Being posted: moved by the caller's transaction, under the event's posting claim.
        IF v_event.status NOT IN ('processing', 'confirmed') OR NOT EXISTS (
            SELECT 1 FROM processed_events p
            WHERE p.idempotency_key = ledger_posting_key(p_event_id)
              AND p.event_id = p_event_id AND p.outcome IN ('pending', 'success')) THEN
            RAISE EXCEPTION 'ledger_apply_balance_change: event % is not being posted (%)',
                p_event_id, v_event.status USING ERRCODE = 'invalid_parameter_value';
        END IF;

        -- The counterparty before the account's row lock (plain reads), as in 0029.
        SELECT a.asset INTO v_asset FROM accounts a WHERE a.id = p_account;
        v_counterparty := ledger_counterparty(p_event_id, p_type, v_asset);

        -- The guard keeps open payout holds whole: a debit never takes the balance below
        -- `held`. The row lock taken here is held until the caller commits.
        UPDATE accounts
        SET balance = balance + p_delta, updated_at = now()
        WHERE id = p_account
          AND balance + p_delta >= held
          AND (NOT p_active_only OR status = 'active')
        RETURNING balance INTO v_balance;
        IF NOT FOUND THEN
            RETURN NULL;  -- refused: nothing written, the caller decides
        END IF;
        INSERT INTO balance_events (account_id, amount, event_type, source_event_id,
                                    balance_after)
        VALUES (p_account, p_delta, p_type, p_event_id, v_balance);
        INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind)
        VALUES (p_event_id, v_counterparty, -p_delta, p_type);
        RETURN v_balance;
    END
    $function$;

-- name: ledger_place_hold
-- A payout's hold or an operator's fee-hold raise (migration 0032, SECURITY DEFINER):
-- positive, placed only if it fits the available balance of an active account; no row
-- when it does not.
CREATE OR REPLACE FUNCTION public.ledger_place_hold(p_account uuid, p_amount numeric)
 RETURNS TABLE(balance numeric, held numeric)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    #variable_conflict use_column
    BEGIN
        IF p_account IS NULL OR p_amount IS NULL OR p_amount <= 0 THEN
            RAISE EXCEPTION 'ledger_place_hold: a hold must be positive'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RETURN QUERY
        UPDATE accounts a SET held = a.held + p_amount, updated_at = now()
        WHERE a.id = p_account AND a.status = 'active' AND a.balance - a.held >= p_amount
        RETURNING a.balance, a.held;
    END
    $function$;

-- name: ledger_release_payout_hold
-- The release of a final (confirmed or failed) payout's whole hold, amount + fee hold
-- (migration 0032, SECURITY DEFINER); returns the account's held after.
CREATE OR REPLACE FUNCTION public.ledger_release_payout_hold(p_payout uuid)
 RETURNS numeric
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    DECLARE
        v_payout record;
        v_held numeric;
    BEGIN
        SELECT p.account_id, p.amount, p.fee_hold, p.status INTO v_payout
        FROM payouts p WHERE p.id = p_payout;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'ledger_release_payout_hold: payout % does not exist', p_payout
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_payout.status NOT IN ('confirmed', 'failed') THEN
            RAISE EXCEPTION 'ledger_release_payout_hold: payout % is % (not final)',
                p_payout, v_payout.status USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- Once: the claim and the release commit together; a second call finds the claim.
        INSERT INTO payout_hold_releases (payout_id, account_id, released)
        VALUES (p_payout, v_payout.account_id, v_payout.amount + v_payout.fee_hold)
        ON CONFLICT (payout_id) DO NOTHING;
        IF NOT FOUND THEN
            SELECT a.held INTO v_held FROM accounts a WHERE a.id = v_payout.account_id;
            RETURN v_held;
        END IF;
        UPDATE accounts SET held = held - (v_payout.amount + v_payout.fee_hold),
                            updated_at = now()
        WHERE id = v_payout.account_id
        RETURNING held INTO v_held;
        RETURN v_held;
    END
    $function$;
