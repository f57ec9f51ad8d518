-- The schema at the head revision: GENERATED, do not edit.
-- Regenerate after adding a migration: uv run python -m payflow.db.schema [SERVER_URL]  (or: make schema)
-- Migrations are the history; this file and each package's functions.sql are today's truth.
-- Roles: payflow_owner owns everything (ownership not shown), payflow_app is the
-- service's login (payflow migrate names them after DB_OWNER_ROLE and DATABASE_URL).

--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: balance_events_append_only(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.balance_events_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    BEGIN
        RAISE EXCEPTION 'balance_events is append-only: % refused', TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END
    $$;

--
-- Name: cleanup_merchant_events(integer, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.cleanup_merchant_events(min_age_days integer, batch_size integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $$
    DECLARE
        age_days integer := greatest(coalesce(min_age_days, 30), 1);
        batch integer := least(greatest(coalesce(batch_size, 1000), 1), 10000);
        deleted integer;
    BEGIN
        WITH doomed AS (
            SELECT e.id FROM merchant_events e
            WHERE e.created_at < now() - make_interval(days => age_days)
            ORDER BY e.created_at LIMIT batch
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM merchant_events e USING doomed d WHERE e.id = d.id;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        RETURN deleted;
    END
    $$;

--
-- Name: cleanup_processed_events(integer, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.cleanup_processed_events(min_age_days integer, batch_size integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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
    $$;

--
-- Name: cleanup_webhook_attempt_log(integer, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.cleanup_webhook_attempt_log(min_age_days integer, batch_size integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    DECLARE
        age_days integer := greatest(coalesce(min_age_days, 1),
                                     1);
        batch integer := least(greatest(coalesce(batch_size, 1000), 1), 10000);
        deleted integer;
    BEGIN
        WITH doomed AS (
            SELECT l.id
            FROM public.webhook_attempt_log l
            WHERE l.attempted_at
                  < pg_catalog.now() - pg_catalog.make_interval(days => age_days)
            ORDER BY l.attempted_at
            LIMIT batch
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM public.webhook_attempt_log l
        USING doomed d
        WHERE l.id = d.id;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        RETURN deleted;
    END
    $$;

--
-- Name: ledger_account(text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_account(p_kind text, p_chain text, p_asset text) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $$
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
    $$;

--
-- Name: ledger_append_only(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_append_only() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END
    $$;

--
-- Name: ledger_apply_balance_change(uuid, numeric, text, text, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_apply_balance_change(p_account uuid, p_delta numeric, p_type text, p_event_id text, p_active_only boolean) RETURNS numeric
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $$
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
    $$;

--
-- Name: ledger_counterparty(text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_counterparty(p_event_id text, p_type text, p_asset text) RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $_$
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
    $_$;

--
-- Name: ledger_place_hold(uuid, numeric); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_place_hold(p_account uuid, p_amount numeric) RETURNS TABLE(balance numeric, held numeric)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $$
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
    $$;

--
-- Name: ledger_post_adjustment(text, text, numeric, text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_post_adjustment(p_account text, p_against text, p_amount numeric, p_reason text, p_by text, p_reference text) RETURNS TABLE(transfer_id bigint, created boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
    $_$;

--
-- Name: ledger_post_network_fee(text, text, numeric); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_post_network_fee(p_chain text, p_tx_hash text, p_amount numeric) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
    $_$;

--
-- Name: ledger_post_opening(uuid, numeric); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_post_opening(p_account uuid, p_amount numeric) RETURNS numeric
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $$
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
    $$;

--
-- Name: ledger_post_reorg_recovery(text, text, numeric); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_post_reorg_recovery(p_reference text, p_transfer_id text, p_amount numeric) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
    $$;

--
-- Name: ledger_post_reorg_shortfall(text, text, numeric); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_post_reorg_shortfall(p_reference text, p_transfer_id text, p_amount numeric) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
    $$;

--
-- Name: ledger_post_success(text, text, text[], text[], text[], integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_post_success(p_key text, p_event_id text, p_sources text[], p_credit_types text[], p_active_types text[], p_lock_timeout_ms integer) RETURNS numeric
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $$
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
    $$;

--
-- Name: ledger_post_system_transfer(text, text, text, text, numeric); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_post_system_transfer(p_kind text, p_reference text, p_debit text, p_credit text, p_amount numeric) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $$
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
    $$;

--
-- Name: ledger_posting_balanced(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_posting_balanced() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $$
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
    $$;

--
-- Name: ledger_posting_key(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_posting_key(p_event_id text) RETURNS text
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    AS $$
        SELECT pg_catalog.encode(pg_catalog.sha256(
            pg_catalog.int8send(2) OPERATOR(pg_catalog.||) pg_catalog.int8send(11)
            OPERATOR(pg_catalog.||) pg_catalog.convert_to('ledger.post', 'UTF8')
            OPERATOR(pg_catalog.||) pg_catalog.int8send(pg_catalog.octet_length(
                   pg_catalog.convert_to(p_event_id, 'UTF8')))
            OPERATOR(pg_catalog.||) pg_catalog.convert_to(p_event_id, 'UTF8')), 'hex')
    $$;

--
-- Name: ledger_release_payout_hold(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_release_payout_hold(p_payout uuid) RETURNS numeric
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $$
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
    $$;

--
-- Name: merchant_event_record(uuid, text, text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.merchant_event_record(p_merchant uuid, p_type text, p_subject text, p_data jsonb) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        RETURN (SELECT r.o_event_id
                FROM merchant_event_record_leasing(p_merchant, p_type, p_subject, p_data,
                                                   NULL, NULL) AS r);
    END
    $$;

--
-- Name: merchant_event_record_leasing(uuid, text, text, jsonb, text, double precision); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.merchant_event_record_leasing(p_merchant uuid, p_type text, p_subject text, p_data jsonb, p_lease_token text, p_lease_s double precision, OUT o_event_id text, OUT o_deliveries bigint[], OUT o_jobs bigint[]) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $$
    DECLARE
        v_until timestamptz := CASE WHEN p_lease_token IS NOT NULL AND p_lease_s > 0
                                    THEN clock_timestamp() + make_interval(secs => p_lease_s)
                               END;
    BEGIN
        INSERT INTO merchant_events (id, merchant_id, type, subject_id, data)
        VALUES ('evt_' || replace(gen_random_uuid()::text, '-', ''),
                p_merchant, p_type, p_subject, p_data)
        ON CONFLICT ON CONSTRAINT merchant_events_once DO NOTHING
        RETURNING id INTO o_event_id;
        IF o_event_id IS NULL THEN
            RETURN;  -- recorded already: its deliveries were made then
        END IF;
        WITH delivery AS (
            INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id, lease_token,
                                            lease_until, next_attempt_at)
            SELECT o_event_id, e.id, e.merchant_id,
                   CASE WHEN v_until IS NOT NULL THEN p_lease_token END, v_until,
                   coalesce(v_until, now())
            FROM webhook_endpoints e
            WHERE e.merchant_id = p_merchant AND e.enabled
              AND ('*' = ANY (e.enabled_events) OR p_type = ANY (e.enabled_events))
            RETURNING id
        ), job AS (
            INSERT INTO outbox (topic, payload, next_attempt_at)
            SELECT 'endpoint.deliver', jsonb_build_object('version', 1, 'delivery_id', d.id),
                   coalesce(v_until, now())
            FROM delivery d
            RETURNING id, (payload ->> 'delivery_id')::bigint AS delivery_id
        )
        SELECT array_agg(job.delivery_id ORDER BY job.delivery_id),
               array_agg(job.id ORDER BY job.delivery_id)
        INTO o_deliveries, o_jobs
        FROM job;
        IF v_until IS NULL THEN
            IF o_deliveries IS NOT NULL THEN
                PERFORM pg_notify('payflow_outbox', '');  -- delivered at commit only
            END IF;
            o_deliveries := NULL;  -- none is leased: nothing for the caller to send
            o_jobs := NULL;
        END IF;
    END
    $$;

--
-- Name: payflow_grant_extra_0013_chain_deposits(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0013_chain_deposits(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    BEGIN
        EXECUTE format('REVOKE DELETE, TRUNCATE ON chain_deposits FROM %I', app);
        EXECUTE format('REVOKE DELETE, TRUNCATE ON chain_deposit_reports FROM %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0014_chain_scanner(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0014_chain_scanner(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    BEGIN
        EXECUTE format('REVOKE DELETE, TRUNCATE ON chain_scanner_cursors FROM %I', app);
        EXECUTE format('REVOKE DELETE, TRUNCATE ON deposit_address_counters FROM %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0015_payouts(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0015_payouts(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        EXECUTE format('GRANT UPDATE (held) ON public.accounts TO %I', app);
        EXECUTE format('REVOKE DELETE ON public.payouts, public.payout_txs, public.hot_wallets'
                       ' FROM %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0016_webhook_leases(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0016_webhook_leases(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        EXECUTE format('GRANT UPDATE (webhook_lease_token, webhook_lease_until)'
                       ' ON public.payments TO %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0017_console(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0017_console(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        EXECUTE format('REVOKE UPDATE, DELETE ON public.webhook_attempt_log FROM %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0018_webhook_chains(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0018_webhook_chains(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        EXECUTE format('GRANT UPDATE (webhook_chain_message, webhook_chain_attempt,'
                       ' webhook_next_attempt_at) ON public.payments TO %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0019_attempt_log_retention(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0019_attempt_log_retention(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.cleanup_webhook_attempt_log(integer,'
                       ' integer) TO %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0020_one_statement_posting(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0020_one_statement_posting(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.ledger_post_success(text, text, text[], text[], text[], integer) TO %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0023_state_gauges(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0023_state_gauges(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        EXECUTE format('REVOKE DELETE, TRUNCATE ON public.state_gauges FROM %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0026_payout_stalls(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0026_payout_stalls(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON public.payout_actions FROM %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0029_double_entry_books(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0029_double_entry_books(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        -- Append-only books; a system account is created, never changed.
        EXECUTE format('REVOKE UPDATE, DELETE ON public.ledger_legs, public.ledger_transfers,'
                       ' public.ledger_accounts FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.ledger_account(text, text, text),'
                       ' public.ledger_counterparty(text, text, text),'
                       ' public.ledger_post_opening(uuid, numeric) TO %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0030_treasury_sweeps(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0030_treasury_sweeps(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        -- an address is removed by setting removed_at/removed_by, never deleted
        EXECUTE format('REVOKE UPDATE, DELETE ON public.treasury_addresses FROM %I', app);
        EXECUTE format('GRANT UPDATE (removed_by, removed_at) ON public.treasury_addresses'
                       ' TO %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.ledger_post_system_transfer(text,'
                       ' text, text, text, numeric) TO %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0031_gas_shortfall_adjustments(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0031_gas_shortfall_adjustments(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
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
    $$;

--
-- Name: payflow_grant_extra_0032_definer_postings(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0032_definer_postings(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        -- The journal: read only; the posting functions write it.
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON public.balance_events,'
                       ' public.ledger_legs, public.ledger_transfers, public.ledger_accounts'
                       ' FROM %I', app);
        -- Balances and holds move only through the posting functions; the service still
        -- freezes and unfreezes.
        EXECUTE format('REVOKE UPDATE ON public.accounts FROM %I', app);
        EXECUTE format('REVOKE UPDATE (balance, held, initial_balance) ON public.accounts'
                       ' FROM %I', app);
        EXECUTE format('GRANT UPDATE (status, updated_at) ON public.accounts TO %I', app);
        -- A new account carries no money: balance, held and initial_balance take their
        -- default 0 (the service may not name them).
        EXECUTE format('REVOKE INSERT ON public.accounts FROM %I', app);
        EXECUTE format('GRANT INSERT (id, asset, status, created_at, updated_at, merchant_id,'
                       ' settlement) ON public.accounts TO %I', app);
        -- An opening balance is an operator's act (the migration login), never the service's.
        EXECUTE format('REVOKE EXECUTE ON FUNCTION public.ledger_post_opening(uuid, numeric) FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.ledger_post_success(text, text, text[], text[], text[], integer), public.ledger_apply_balance_change(uuid, numeric, text, text, boolean),'
                       ' public.ledger_place_hold(uuid, numeric), public.ledger_release_payout_hold(uuid), public.ledger_posting_key(text)'
                       ' TO %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0034_hold_released_once(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0034_hold_released_once(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        -- Read only: the release function (the owner) is the table's only writer.
        EXECUTE format('REVOKE ALL ON public.payout_hold_releases FROM %I', app);
        EXECUTE format('GRANT SELECT ON public.payout_hold_releases TO %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0035_merchant_events(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0035_merchant_events(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        -- Appended in the causing transaction and read; removed only by the retention job.
        EXECUTE format('REVOKE ALL ON public.merchant_events FROM %I', app);
        EXECUTE format('GRANT SELECT, INSERT ON public.merchant_events TO %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.cleanup_merchant_events(integer,'
                       ' integer) TO %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0037_event_emission(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0037_event_emission(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        -- Events are recorded only through merchant_event_record (after 0035's hook,
        -- which granted INSERT: the hooks run in name order).
        EXECUTE format('REVOKE INSERT ON public.merchant_events FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.merchant_event_record(uuid, text, text, jsonb) TO %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0038_api_keys(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0038_api_keys(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        -- Keys are read, created and revoked (and their use stamped); never deleted,
        -- never re-scoped, never given back their secret or another merchant.
        EXECUTE format('REVOKE ALL ON public.api_keys FROM %I', app);
        EXECUTE format('GRANT SELECT ON public.api_keys TO %I', app);
        EXECUTE format('GRANT INSERT (merchant_id, name, scope, key_hash, hint, expires_at)'
                       ' ON public.api_keys TO %I', app);
        EXECUTE format('GRANT UPDATE (revoked_at, last_used_at) ON public.api_keys TO %I',
                       app);
    END
    $$;

--
-- Name: payflow_grant_extra_0039_webhook_endpoints(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0039_webhook_endpoints(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        -- Endpoints are soft-deleted (deliveries and their audit name them).
        EXECUTE format('REVOKE ALL ON public.webhook_endpoints FROM %I', app);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE ON public.webhook_endpoints TO %I', app);
        -- Deliveries change state; their rows go only with their event (retention).
        EXECUTE format('REVOKE ALL ON public.webhook_deliveries FROM %I', app);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE ON public.webhook_deliveries TO %I', app);
        -- The attempt log and the redelivery audit are append-only for the service.
        EXECUTE format('REVOKE ALL ON public.webhook_delivery_attempts FROM %I', app);
        EXECUTE format('GRANT SELECT, INSERT ON public.webhook_delivery_attempts TO %I', app);
        EXECUTE format('REVOKE ALL ON public.webhook_redeliveries FROM %I', app);
        EXECUTE format('GRANT SELECT, INSERT ON public.webhook_redeliveries TO %I', app);
        -- Events (and so their deliveries) are recorded only through the function.
        EXECUTE format('REVOKE INSERT ON public.merchant_events FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.merchant_event_record(uuid, text,'
                       ' text, jsonb) TO %I', app);
    END
    $$;

--
-- Name: payflow_grant_extra_0040_endpoint_direct_sends(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_extra_0040_endpoint_direct_sends(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.payment_finalize(uuid, text, uuid, text, text, numeric, text, text, text, jsonb, text, jsonb, double precision, text, text, text, integer, text, double precision, text, text[], text[], text[], text, double precision) TO %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.merchant_event_record_leasing(uuid, text, text, jsonb, text, double precision) TO %I', app);
    END
    $$;

--
-- Name: payflow_grant_hooks(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_hooks(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
    DECLARE
        hook text;
    BEGIN
        FOR hook IN
            SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'public' AND p.proname LIKE 'payflow\_grant\_extra\_%'
            ORDER BY p.proname
        LOOP
            EXECUTE format('SELECT public.%I($1)', hook) USING app;
        END LOOP;
    END
    $_$;

--
-- Name: payflow_grant_service(name); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payflow_grant_service(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    BEGIN
        IF app IS NULL OR app = current_user THEN
            RAISE EXCEPTION 'the service role must be a role other than the owner %',
                current_user;
        END IF;
        -- Start from nothing, so a run is idempotent and removes what is no longer granted.
        EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA public FROM %I', app);
        EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM %I', app);
        EXECUTE format('GRANT USAGE ON SCHEMA public TO %I', app);
        -- Every table (also those added by later migrations): DML, never TRUNCATE.
        EXECUTE format(
            'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO %I', app);
        EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO %I', app);
        -- Then take back what the code never does. The append-only ledger: read, append.
        EXECUTE format('REVOKE UPDATE, DELETE ON public.balance_events FROM %I', app);
        -- Posting claims: insert, and set the outcome; removal only via the cleanup function.
        EXECUTE format('REVOKE UPDATE, DELETE ON public.processed_events FROM %I', app);
        EXECUTE format('GRANT UPDATE (outcome) ON public.processed_events TO %I', app);
        -- Accounts: balance and status move; the opening balance (which reconciliation
        -- adds to the ledger sum), the asset and the owner never do.
        EXECUTE format('REVOKE UPDATE ON public.accounts FROM %I', app);
        EXECUTE format('GRANT UPDATE (balance, status, updated_at) ON public.accounts TO %I', app);
        -- Reference data and the migration history: read only / nothing.
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON public.assets FROM %I', app);
        EXECUTE format('REVOKE ALL ON public.alembic_version FROM %I', app);
        -- Registries decide which asset and how much: operators change them with the
        -- migration login (`payflow tokens add`, `payflow assets set-limit`), never the service.
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON public.chains, public.chain_tokens'
                       ' FROM %I', app);
        -- Evidence: kept raw deliveries and charge attempts are appended and updated only.
        EXECUTE format('REVOKE UPDATE, DELETE ON public.provider_deliveries FROM %I', app);
        EXECUTE format('REVOKE DELETE ON public.charge_attempts FROM %I', app);
        -- What an event or a payment moves (amount, account, merchant, currency, type, id)
        -- is written once at insert: the service may update only their lifecycle columns.
        EXECUTE format('REVOKE UPDATE ON public.payment_events FROM %I', app);
        EXECUTE format('GRANT UPDATE (status, retry_count, last_error, updated_at)'
                       ' ON public.payment_events TO %I', app);
        EXECUTE format('REVOKE UPDATE ON public.payments FROM %I', app);
        EXECUTE format('GRANT UPDATE (status, processed_at, webhook_attempts,'
                       ' webhook_delivered_at, webhook_dead_at, payment_sweeps,'
                       ' payment_swept_at, webhook_sweeps, webhook_swept_at)'
                       ' ON public.payments TO %I', app);
        -- Operations' records (migrations 0010, 0011), when present: alerts are resolved,
        -- never deleted.
        IF to_regclass('public.alerts') IS NOT NULL THEN
            EXECUTE format('REVOKE DELETE ON public.alerts FROM %I', app);
        END IF;
        -- Rows that are never deleted by the service.
        EXECUTE format('REVOKE DELETE ON public.accounts, public.payment_events,'
                       ' public.payments, public.dead_letter_queue,'
                       ' public.unmatched_provider_events FROM %I', app);
        EXECUTE format('REVOKE UPDATE, DELETE ON public.merchants,'
                       ' public.deposit_addresses FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.cleanup_processed_events(integer,'
                       ' integer) TO %I', app);
        -- Tables and sequences the owner creates later start with the same base grant.
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT,'
                       ' UPDATE, DELETE ON TABLES TO %I', app);
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON'
                       ' SEQUENCES TO %I', app);
    END
    $$;

--
-- Name: payment_finalize(uuid, text, uuid, text, text, numeric, text, text, text, jsonb, text, jsonb, double precision, text, text, text, integer, text, double precision, text, text[], text[], text[], text, double precision); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.payment_finalize(uuid, text, uuid, text, text, numeric, text, text, text, jsonb, text, jsonb, double precision, text, text, text, integer, text, double precision, text, text[], text[], text[], text, double precision, OUT o_finalized boolean, OUT o_credited boolean, OUT o_credit_job bigint, OUT o_held_webhook_job bigint, OUT o_balance_after numeric, OUT o_held_deliveries bigint[], OUT o_held_delivery_jobs bigint[]) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_catalog', 'pg_temp'
    AS $_$
    BEGIN
        WITH bound AS MATERIALIZED (
            SELECT CASE WHEN $17::integer IS NOT NULL
                   THEN pg_catalog.set_config('lock_timeout', $17::integer::text, true) END
        ), locked AS MATERIALIZED (
            SELECT p.id FROM payments p, bound
            WHERE p.id = $1 AND p.status NOT IN ('succeeded', 'failed')
            FOR UPDATE OF p
        ), account AS MATERIALIZED (
            SELECT a.id FROM accounts a
            WHERE $5::text IS NOT NULL AND a.merchant_id = $3 AND a.asset = $4 AND a.settlement
        ), answered AS MATERIALIZED (
            UPDATE charge_attempts
            SET state = $14, reason = $15, gateway_reference = $16,
                answered_at = clock_timestamp()
            WHERE $14::text IS NOT NULL AND payment_id = (SELECT id FROM locked)
              AND state IN ('claimed', 'needs_review')
              AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM account))
            RETURNING attempt_id
        ), lease AS MATERIALIZED (
            SELECT CASE WHEN $12::jsonb IS NOT NULL AND $18::text IS NOT NULL
                   THEN clock_timestamp() + make_interval(secs => $19::float8) END AS until
        ), fin AS (
            UPDATE payments SET status = $2, processed_at = clock_timestamp(),
                webhook_lease_token = CASE WHEN lease.until IS NOT NULL THEN $18
                                           ELSE webhook_lease_token END,
                webhook_lease_until = coalesce(lease.until, webhook_lease_until),
                webhook_next_attempt_at = coalesce(lease.until, webhook_next_attempt_at)
            FROM lease
            WHERE id = (SELECT id FROM locked)
              AND ($14::text IS NULL OR EXISTS (SELECT 1 FROM answered))
            RETURNING id, lease.until AS lease_until
        ), credit AS (
            -- No ON CONFLICT: an existing row with this derived id was not written for
            -- this payment, so the unique violation on payment_events_pkey stops the
            -- statement (the caller raises IdCollision).
            INSERT INTO payment_events (event_id, account_id, amount, event_type, trace_id)
            SELECT $5, account.id, $6, $7, $8 FROM account, fin
            RETURNING event_id
        ), credit_job AS (
            -- Posted here ($20): the job is written below only if the posting did not.
            INSERT INTO outbox (topic, payload, trace_id, next_attempt_at)
            SELECT $9, $10, $8, now() + make_interval(secs => $13::float8) FROM account, fin
            WHERE $20::text IS NULL
            RETURNING id
        ), webhook_job AS (
            INSERT INTO outbox (topic, payload, trace_id, next_attempt_at)
            SELECT $11, $12, $8, coalesce(fin.lease_until, now()) FROM fin
            WHERE $12::jsonb IS NOT NULL
            RETURNING id
        ), wake AS (
            -- The relay is woken only for a job due now: a held one is the worker's.
            SELECT pg_notify('payflow_outbox', '') FROM fin
            WHERE ($20::text IS NULL AND $13::float8 <= 0 AND EXISTS (SELECT 1 FROM account))
               OR ($12::jsonb IS NOT NULL AND fin.lease_until IS NULL)
        )
        SELECT EXISTS (SELECT 1 FROM fin),
               EXISTS (SELECT 1 FROM account),
               (SELECT id FROM credit_job),
               (SELECT webhook_job.id FROM webhook_job, fin WHERE fin.lease_until IS NOT NULL)
        INTO o_finalized, o_credited, o_credit_job, o_held_webhook_job
        FROM (SELECT count(*) FROM wake) AS woken;

        IF o_finalized THEN
            -- The merchant's event of this outcome (subject: the payment), amounts as
            -- text at the currency's scale, never fewer digits than stored.
            SELECT r.o_deliveries, r.o_jobs INTO o_held_deliveries, o_held_delivery_jobs
            FROM payments p LEFT JOIN assets s ON s.code = p.currency,
            LATERAL merchant_event_record_leasing(
                p.merchant_id, 'payment.' || p.status, p.id::text,
                jsonb_build_object(
                    'payment_id', p.id::text,
                    'status', p.status,
                    'amount', round(trim_scale(p.amount),
                                    greatest(coalesce(s.scale, 0),
                                             scale(trim_scale(p.amount))))::text,
                    'currency', p.currency,
                    'description', p.description,
                    'metadata', p.metadata,
                    'created_at', to_char(p.created_at AT TIME ZONE 'UTC',
                                          'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                    'processed_at', to_char(p.processed_at AT TIME ZONE 'UTC',
                                            'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')),
                $24, $25) AS r
            WHERE p.id = $1;
        END IF;

        IF $20 IS NULL OR NOT o_finalized OR NOT o_credited OR $5 IS NULL THEN
            RETURN;
        END IF;
        -- The ledger's one success path; it raises (and so undoes this whole statement)
        -- when it cannot decide, and answers NULL when the key is claimed already.
        o_balance_after := ledger_post_success($20, $5, $21, $22, $23, $17);
        IF o_balance_after IS NULL THEN
            INSERT INTO outbox (topic, payload, trace_id) VALUES ($9, $10, $8)
            RETURNING id INTO o_credit_job;
            PERFORM pg_notify('payflow_outbox', '');
        END IF;
    END
    $_$;

SET default_table_access_method = heap;

--
-- Name: accounts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.accounts (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    asset text NOT NULL,
    balance numeric(78,18) DEFAULT 0 NOT NULL,
    initial_balance numeric(78,18) DEFAULT 0 NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    merchant_id uuid,
    settlement boolean DEFAULT false NOT NULL,
    held numeric(78,18) DEFAULT 0 NOT NULL,
    CONSTRAINT accounts_balance_non_negative CHECK ((balance >= (0)::numeric)),
    CONSTRAINT accounts_held_non_negative CHECK ((held >= (0)::numeric)),
    CONSTRAINT accounts_held_within_balance CHECK ((held <= balance)),
    CONSTRAINT accounts_initial_balance_non_negative CHECK ((initial_balance >= (0)::numeric)),
    CONSTRAINT accounts_settlement_has_merchant CHECK (((NOT settlement) OR (merchant_id IS NOT NULL))),
    CONSTRAINT accounts_status_valid CHECK ((status = ANY (ARRAY['active'::text, 'frozen'::text])))
);

--
-- Name: alembic_version; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.alembic_version (
    version_num character varying(32) NOT NULL
);

--
-- Name: alerts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.alerts (
    id bigint NOT NULL,
    key text NOT NULL,
    severity text NOT NULL,
    message text NOT NULL,
    details jsonb DEFAULT '{}'::jsonb NOT NULL,
    first_seen timestamp with time zone DEFAULT now() NOT NULL,
    last_seen timestamp with time zone DEFAULT now() NOT NULL,
    count bigint DEFAULT 1 NOT NULL,
    resolved_at timestamp with time zone,
    acknowledged_at timestamp with time zone,
    acknowledged_by text,
    CONSTRAINT alerts_acknowledged_by_length CHECK ((length(acknowledged_by) <= 200)),
    CONSTRAINT alerts_acknowledged_by_whom CHECK (((acknowledged_at IS NULL) = (acknowledged_by IS NULL))),
    CONSTRAINT alerts_count_positive CHECK ((count >= 1)),
    CONSTRAINT alerts_details_object CHECK ((jsonb_typeof(details) = 'object'::text)),
    CONSTRAINT alerts_key_length CHECK (((length(key) >= 1) AND (length(key) <= 200))),
    CONSTRAINT alerts_message_length CHECK ((length(message) <= 4000)),
    CONSTRAINT alerts_resolved_after_first_seen CHECK (((resolved_at IS NULL) OR (resolved_at >= first_seen))),
    CONSTRAINT alerts_seen_order CHECK ((last_seen >= first_seen)),
    CONSTRAINT alerts_severity_valid CHECK ((severity = ANY (ARRAY['info'::text, 'warning'::text, 'critical'::text])))
);

--
-- Name: alerts_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.alerts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.alerts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: api_idempotency; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_idempotency (
    merchant_id uuid NOT NULL,
    scope text NOT NULL,
    key text NOT NULL,
    request_hash text NOT NULL,
    state text DEFAULT 'in_progress'::text NOT NULL,
    response_status smallint,
    response_body json,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT api_idempotency_key_length CHECK (((length(key) >= 1) AND (length(key) <= 255))),
    CONSTRAINT api_idempotency_response_when_completed CHECK (((state = 'completed'::text) = ((response_status IS NOT NULL) AND (response_body IS NOT NULL)))),
    CONSTRAINT api_idempotency_scope_length CHECK (((length(scope) >= 1) AND (length(scope) <= 200))),
    CONSTRAINT api_idempotency_state_valid CHECK ((state = ANY (ARRAY['in_progress'::text, 'completed'::text])))
);

--
-- Name: api_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_keys (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    merchant_id uuid NOT NULL,
    name text NOT NULL,
    scope text NOT NULL,
    key_hash text NOT NULL,
    hint text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    last_used_at timestamp with time zone,
    CONSTRAINT api_keys_expiry_after_creation CHECK (((expires_at IS NULL) OR (expires_at > created_at))),
    CONSTRAINT api_keys_hint_length CHECK (((hint IS NULL) OR (length(hint) = 4))),
    CONSTRAINT api_keys_name_length CHECK (((length(name) >= 1) AND (length(name) <= 100))),
    CONSTRAINT api_keys_scope_valid CHECK ((scope = ANY (ARRAY['read'::text, 'write'::text])))
);

--
-- Name: assets; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.assets (
    code text NOT NULL,
    scale smallint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    max_payment numeric(38,18) DEFAULT 1000000000 NOT NULL,
    max_withdrawal numeric(38,18) DEFAULT 1000000000 NOT NULL,
    max_deposit numeric(38,18) DEFAULT 1000000000 NOT NULL,
    CONSTRAINT assets_code_format CHECK ((code ~ '^[A-Z0-9]{2,12}$'::text)),
    CONSTRAINT assets_max_deposit_range CHECK (((max_deposit > (0)::numeric) AND (max_deposit < '100000000000000000000'::numeric))),
    CONSTRAINT assets_max_payment_range CHECK (((max_payment > (0)::numeric) AND (max_payment < '100000000000000000000'::numeric))),
    CONSTRAINT assets_max_withdrawal_range CHECK (((max_withdrawal > (0)::numeric) AND (max_withdrawal < '100000000000000000000'::numeric))),
    CONSTRAINT assets_scale_range CHECK (((scale >= 0) AND (scale <= 18)))
);

--
-- Name: balance_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.balance_events (
    id bigint NOT NULL,
    account_id uuid NOT NULL,
    amount numeric(38,18) NOT NULL,
    event_type text NOT NULL,
    source_event_id text NOT NULL,
    balance_after numeric(78,18) NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT balance_events_amount_non_zero CHECK ((amount <> (0)::numeric)),
    CONSTRAINT balance_events_balance_after_non_negative CHECK ((balance_after >= (0)::numeric))
);

--
-- Name: balance_events_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.balance_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.balance_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: chain_deposit_reports; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.chain_deposit_reports (
    id bigint NOT NULL,
    source text NOT NULL,
    provider_event_id text,
    chain text NOT NULL,
    tx_hash text NOT NULL,
    "position" integer,
    log_index integer,
    claim text NOT NULL,
    to_address text NOT NULL,
    contract text,
    units numeric(78,0) NOT NULL,
    account_id uuid NOT NULL,
    amount numeric(38,18) NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    transfer_id text,
    reason text,
    checks integer DEFAULT 0 NOT NULL,
    next_check_at timestamp with time zone DEFAULT now() NOT NULL,
    trace_id text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    decided_at timestamp with time zone,
    CONSTRAINT chain_deposit_reports_confirmed_linked CHECK (((status <> 'confirmed'::text) OR (transfer_id IS NOT NULL))),
    CONSTRAINT chain_deposit_reports_position_range CHECK (("position" >= '-1'::integer)),
    CONSTRAINT chain_deposit_reports_refuted_reason CHECK (((status <> 'refuted'::text) OR (reason IS NOT NULL))),
    CONSTRAINT chain_deposit_reports_source_valid CHECK ((source = ANY (ARRAY['webhook'::text, 'alchemy'::text, 'scanner'::text]))),
    CONSTRAINT chain_deposit_reports_status_valid CHECK ((status = ANY (ARRAY['pending'::text, 'confirmed'::text, 'refuted'::text])))
);

--
-- Name: chain_deposit_reports_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.chain_deposit_reports_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: chain_deposit_reports_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.chain_deposit_reports_id_seq OWNED BY public.chain_deposit_reports.id;

--
-- Name: chain_deposits; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.chain_deposits (
    transfer_id text NOT NULL,
    chain text NOT NULL,
    tx_hash text NOT NULL,
    "position" integer NOT NULL,
    to_address text NOT NULL,
    contract text,
    units numeric(78,0) NOT NULL,
    account_id uuid NOT NULL,
    asset text NOT NULL,
    amount numeric(38,18) NOT NULL,
    status text DEFAULT 'verified'::text NOT NULL,
    block_number bigint NOT NULL,
    block_hash text NOT NULL,
    sources text[] NOT NULL,
    credit_event_id text,
    reversal_event_id text,
    shortfall numeric(38,18),
    checks integer DEFAULT 0 NOT NULL,
    next_check_at timestamp with time zone DEFAULT now() NOT NULL,
    trace_id text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    verified_at timestamp with time zone,
    credited_at timestamp with time zone,
    past_credit_events text[] DEFAULT '{}'::text[] NOT NULL,
    CONSTRAINT chain_deposits_amount_positive CHECK ((amount > (0)::numeric)),
    CONSTRAINT chain_deposits_contract_format CHECK ((contract ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT chain_deposits_credit_known CHECK (((status <> ALL (ARRAY['credited'::text, 'reversed'::text])) OR (credit_event_id IS NOT NULL))),
    CONSTRAINT chain_deposits_id_format CHECK ((transfer_id = ((((chain || ':'::text) || tx_hash) || ':'::text) || "position"))),
    CONSTRAINT chain_deposits_position_range CHECK (("position" >= '-1'::integer)),
    CONSTRAINT chain_deposits_shortfall_positive CHECK ((shortfall > (0)::numeric)),
    CONSTRAINT chain_deposits_status_valid CHECK ((status = ANY (ARRAY['verified'::text, 'orphaned'::text, 'credited'::text, 'reversed'::text]))),
    CONSTRAINT chain_deposits_tx_hash_format CHECK ((tx_hash ~ '^0x[0-9a-f]{64}$'::text)),
    CONSTRAINT chain_deposits_units_positive CHECK ((units > (0)::numeric))
);

--
-- Name: chain_scanner_blocks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.chain_scanner_blocks (
    chain text NOT NULL,
    block_number bigint NOT NULL,
    block_hash text NOT NULL,
    parent_hash text NOT NULL,
    CONSTRAINT chain_scanner_blocks_hash_format CHECK ((block_hash ~ '^0x[0-9a-f]{64}$'::text)),
    CONSTRAINT chain_scanner_blocks_parent_format CHECK ((parent_hash ~ '^0x[0-9a-f]{64}$'::text))
);

--
-- Name: chain_scanner_cursors; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.chain_scanner_cursors (
    chain text NOT NULL,
    block_number bigint NOT NULL,
    block_hash text NOT NULL,
    reorgs bigint DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT chain_scanner_cursors_chain_format CHECK ((chain ~ '^[A-Z0-9_]{2,40}$'::text)),
    CONSTRAINT chain_scanner_cursors_hash_format CHECK ((block_hash ~ '^0x[0-9a-f]{64}$'::text)),
    CONSTRAINT chain_scanner_cursors_number_range CHECK ((block_number >= 0))
);

--
-- Name: chain_tokens; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.chain_tokens (
    chain text NOT NULL,
    contract text NOT NULL,
    asset text NOT NULL,
    decimals smallint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT chain_tokens_contract_format CHECK ((contract ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT chain_tokens_decimals_range CHECK (((decimals >= 0) AND (decimals <= 18)))
);

--
-- Name: chains; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.chains (
    chain text NOT NULL,
    native_asset text NOT NULL,
    native_decimals smallint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    chain_id bigint,
    CONSTRAINT chains_chain_format CHECK ((chain ~ '^[A-Z0-9_]{2,40}$'::text)),
    CONSTRAINT chains_chain_id_positive CHECK ((chain_id > 0)),
    CONSTRAINT chains_native_decimals_range CHECK (((native_decimals >= 0) AND (native_decimals <= 18)))
);

--
-- Name: charge_attempts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.charge_attempts (
    attempt_id uuid DEFAULT gen_random_uuid() NOT NULL,
    payment_id uuid NOT NULL,
    attempt integer NOT NULL,
    state text DEFAULT 'claimed'::text NOT NULL,
    claimed_by text NOT NULL,
    claimed_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    lease_until timestamp with time zone NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    gateway_reference text DEFAULT ''::text NOT NULL,
    answered_at timestamp with time zone,
    CONSTRAINT charge_attempts_answered_when_final CHECK (((state = ANY (ARRAY['approved'::text, 'declined'::text])) = (answered_at IS NOT NULL))),
    CONSTRAINT charge_attempts_attempt_positive CHECK ((attempt >= 1)),
    CONSTRAINT charge_attempts_reason_length CHECK ((length(reason) <= 1024)),
    CONSTRAINT charge_attempts_reference_length CHECK ((length(gateway_reference) <= 256)),
    CONSTRAINT charge_attempts_state_valid CHECK ((state = ANY (ARRAY['claimed'::text, 'approved'::text, 'declined'::text, 'superseded'::text, 'needs_review'::text])))
);

--
-- Name: console_sessions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.console_sessions (
    token_sha256 text NOT NULL,
    merchant_id uuid NOT NULL,
    csrf_token text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    revoked_at timestamp with time zone,
    api_key_id uuid NOT NULL,
    CONSTRAINT console_sessions_csrf_length CHECK ((length(csrf_token) >= 32)),
    CONSTRAINT console_sessions_expiry_after_creation CHECK ((expires_at > created_at)),
    CONSTRAINT console_sessions_token_hex CHECK ((token_sha256 ~ '^[0-9a-f]{64}$'::text))
);

--
-- Name: dead_letter_queue; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.dead_letter_queue (
    id bigint NOT NULL,
    source text NOT NULL,
    subject_id text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    error text NOT NULL,
    attempt integer NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    resolved_at timestamp with time zone,
    resolved_by text,
    resolution text,
    CONSTRAINT dead_letter_queue_attempt_positive CHECK ((attempt >= 1)),
    CONSTRAINT dead_letter_queue_resolution_complete CHECK (((resolved_at IS NULL) = (resolved_by IS NULL))),
    CONSTRAINT dead_letter_queue_source_valid CHECK ((source = ANY (ARRAY['payment_event'::text, 'payment'::text, 'webhook'::text, 'endpoint_delivery'::text])))
);

--
-- Name: dead_letter_queue_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.dead_letter_queue_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: dead_letter_queue_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.dead_letter_queue_id_seq OWNED BY public.dead_letter_queue.id;

--
-- Name: deposit_address_counters; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.deposit_address_counters (
    chain text NOT NULL,
    next_index bigint DEFAULT 0 NOT NULL,
    CONSTRAINT deposit_address_counters_chain_format CHECK ((chain ~ '^[A-Z0-9_]{2,40}$'::text)),
    CONSTRAINT deposit_address_counters_index_range CHECK (((next_index >= 0) AND (next_index < '2147483648'::bigint)))
);

--
-- Name: deposit_addresses; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.deposit_addresses (
    chain text NOT NULL,
    address text NOT NULL,
    account_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    derivation_index bigint,
    derived_by uuid,
    derive_key text,
    CONSTRAINT deposit_addresses_address_format CHECK (((address ~ '^0x[0-9a-f]{40}$'::text) OR (address ~ '^[1-9A-HJ-NP-Za-km-z]{8,128}$'::text))),
    CONSTRAINT deposit_addresses_chain_format CHECK ((chain ~ '^[A-Z0-9_]{2,40}$'::text)),
    CONSTRAINT deposit_addresses_derivation_index_range CHECK (((derivation_index >= 0) AND (derivation_index < '2147483648'::bigint))),
    CONSTRAINT deposit_addresses_derive_key_pair CHECK (((derived_by IS NULL) = (derive_key IS NULL)))
);

--
-- Name: hot_wallets; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.hot_wallets (
    chain text NOT NULL,
    address text NOT NULL,
    next_nonce bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT hot_wallets_address_format CHECK ((address ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT hot_wallets_nonce_non_negative CHECK ((next_nonce >= 0))
);

--
-- Name: job_runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_runs (
    id bigint NOT NULL,
    job text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    outcome text,
    summary text DEFAULT ''::text NOT NULL,
    host text DEFAULT ''::text NOT NULL,
    pid integer DEFAULT 0 NOT NULL,
    CONSTRAINT job_runs_finished_with_outcome CHECK (((finished_at IS NULL) = (outcome IS NULL))),
    CONSTRAINT job_runs_job_length CHECK (((length(job) >= 1) AND (length(job) <= 100))),
    CONSTRAINT job_runs_outcome_valid CHECK ((outcome = ANY (ARRAY['ok'::text, 'alert'::text, 'skipped'::text, 'failed'::text]))),
    CONSTRAINT job_runs_summary_length CHECK ((length(summary) <= 2000))
);

--
-- Name: job_runs_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.job_runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: job_runs_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.job_runs_id_seq OWNED BY public.job_runs.id;

--
-- Name: ledger_accounts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ledger_accounts (
    code text NOT NULL,
    kind text NOT NULL,
    chain text,
    asset text NOT NULL,
    normal_side text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT ledger_accounts_chain_format CHECK ((chain ~ '^([A-Z0-9_]{2,40}|external)$'::text)),
    CONSTRAINT ledger_accounts_chain_where_needed CHECK (((kind = ANY (ARRAY['custody'::text, 'network_fees'::text, 'treasury'::text])) = (chain IS NOT NULL))),
    CONSTRAINT ledger_accounts_code_format CHECK ((code = (((kind || ':'::text) || COALESCE((chain || ':'::text), ''::text)) || asset))),
    CONSTRAINT ledger_accounts_kind_valid CHECK ((kind = ANY (ARRAY['custody'::text, 'gateway'::text, 'fees'::text, 'network_fees'::text, 'reorg_loss'::text, 'opening'::text, 'adjustments'::text, 'treasury'::text]))),
    CONSTRAINT ledger_accounts_normal_side_valid CHECK ((normal_side =
CASE
    WHEN (kind = 'fees'::text) THEN 'credit'::text
    ELSE 'debit'::text
END))
);

--
-- Name: ledger_adjustments; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ledger_adjustments (
    id bigint NOT NULL,
    transfer_id bigint NOT NULL,
    reference text NOT NULL,
    account_id uuid,
    ledger_account text,
    against text NOT NULL,
    asset text NOT NULL,
    amount numeric(78,18) NOT NULL,
    reason text NOT NULL,
    adjusted_by text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT ledger_adjustments_amount_non_zero CHECK ((amount <> (0)::numeric)),
    CONSTRAINT ledger_adjustments_by_length CHECK (((length(btrim(adjusted_by)) >= 1) AND (length(btrim(adjusted_by)) <= 200))),
    CONSTRAINT ledger_adjustments_one_account CHECK ((num_nonnulls(account_id, ledger_account) = 1)),
    CONSTRAINT ledger_adjustments_reason_length CHECK (((length(btrim(reason)) >= 1) AND (length(btrim(reason)) <= 500)))
);

--
-- Name: ledger_adjustments_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.ledger_adjustments ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.ledger_adjustments_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: ledger_legs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ledger_legs (
    id bigint NOT NULL,
    source_event_id text,
    transfer_id bigint,
    account_id uuid,
    ledger_account text,
    amount numeric(78,18) NOT NULL,
    kind text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT ledger_legs_amount_non_zero CHECK ((amount <> (0)::numeric)),
    CONSTRAINT ledger_legs_one_account CHECK ((num_nonnulls(account_id, ledger_account) = 1)),
    CONSTRAINT ledger_legs_one_posting CHECK ((num_nonnulls(source_event_id, transfer_id) = 1))
);

--
-- Name: ledger_journal; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.ledger_journal AS
 SELECT b.source_event_id,
    NULL::bigint AS transfer_id,
    b.account_id,
    NULL::text AS ledger_account,
    a.asset,
    b.amount,
    b.event_type AS kind,
    b.created_at
   FROM (public.balance_events b
     JOIN public.accounts a ON ((a.id = b.account_id)))
UNION ALL
 SELECT l.source_event_id,
    l.transfer_id,
    l.account_id,
    l.ledger_account,
    COALESCE(s.asset, c.asset) AS asset,
    l.amount,
    l.kind,
    l.created_at
   FROM ((public.ledger_legs l
     LEFT JOIN public.ledger_accounts s ON ((s.code = l.ledger_account)))
     LEFT JOIN public.accounts c ON ((c.id = l.account_id)));

--
-- Name: ledger_legs_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.ledger_legs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.ledger_legs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: ledger_transfers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ledger_transfers (
    id bigint NOT NULL,
    kind text NOT NULL,
    reference text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT ledger_transfers_kind_valid CHECK ((kind = ANY (ARRAY['opening'::text, 'treasury_sweep'::text, 'treasury_funding'::text, 'sweep_gas'::text, 'network_fee'::text, 'reorg_shortfall'::text, 'reorg_recovery'::text, 'adjustment'::text]))),
    CONSTRAINT ledger_transfers_reference_length CHECK (((length(reference) >= 1) AND (length(reference) <= 200)))
);

--
-- Name: ledger_transfers_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.ledger_transfers ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.ledger_transfers_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: merchant_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.merchant_events (
    id text NOT NULL,
    merchant_id uuid NOT NULL,
    type text NOT NULL,
    subject_id text NOT NULL,
    data jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT merchant_events_data_check CHECK ((jsonb_typeof(data) = 'object'::text)),
    CONSTRAINT merchant_events_id_check CHECK ((id ~ '^evt_[0-9a-f]{32}$'::text)),
    CONSTRAINT merchant_events_subject_id_check CHECK (((length(subject_id) >= 1) AND (length(subject_id) <= 200))),
    CONSTRAINT merchant_events_type_check CHECK ((type = ANY (ARRAY['payment.succeeded'::text, 'payment.failed'::text, 'deposit.pending'::text, 'deposit.credited'::text, 'deposit.reversed'::text, 'payout.held'::text, 'payout.sent'::text, 'payout.confirmed'::text, 'payout.failed'::text])))
);

--
-- Name: merchants; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.merchants (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    webhook_secret text NOT NULL,
    is_admin boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT merchants_name_length CHECK (((length(name) >= 1) AND (length(name) <= 200)))
);

--
-- Name: outbox; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outbox (
    id bigint NOT NULL,
    topic text NOT NULL,
    payload jsonb NOT NULL,
    trace_id text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    published_at timestamp with time zone,
    publish_attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    last_error text
);

--
-- Name: outbox_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.outbox ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: payment_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.payment_events (
    event_id text NOT NULL,
    account_id uuid NOT NULL,
    amount numeric(38,18) NOT NULL,
    event_type text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    retry_count integer DEFAULT 0 NOT NULL,
    last_error text,
    trace_id text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT payment_events_amount_positive CHECK ((amount > (0)::numeric)),
    CONSTRAINT payment_events_event_id_length CHECK (((length(event_id) >= 1) AND (length(event_id) <= 200))),
    CONSTRAINT payment_events_retry_count_non_negative CHECK ((retry_count >= 0)),
    CONSTRAINT payment_events_status_valid CHECK ((status = ANY (ARRAY['pending'::text, 'enqueued'::text, 'processing'::text, 'confirmed'::text, 'failed'::text]))),
    CONSTRAINT payment_events_type_valid CHECK ((event_type = ANY (ARRAY['deposit'::text, 'airdrop'::text, 'withdrawal'::text, 'withdrawal_fee'::text, 'payment_credit'::text, 'deposit_reversal'::text])))
);

--
-- Name: payments; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.payments (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    merchant_id uuid NOT NULL,
    amount numeric(38,18) NOT NULL,
    currency text NOT NULL,
    description text,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    idempotency_key text NOT NULL,
    webhook_url text,
    webhook_delivered_at timestamp with time zone,
    webhook_attempts integer DEFAULT 0 NOT NULL,
    trace_id text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    processed_at timestamp with time zone,
    webhook_dead_at timestamp with time zone,
    payment_sweeps integer DEFAULT 0 NOT NULL,
    payment_swept_at timestamp with time zone,
    webhook_sweeps integer DEFAULT 0 NOT NULL,
    webhook_swept_at timestamp with time zone,
    webhook_lease_token text,
    webhook_lease_until timestamp with time zone,
    webhook_chain_message text,
    webhook_chain_attempt integer,
    webhook_next_attempt_at timestamp with time zone,
    CONSTRAINT payments_amount_positive CHECK ((amount > (0)::numeric)),
    CONSTRAINT payments_description_length CHECK ((length(description) <= 512)),
    CONSTRAINT payments_payment_sweeps_non_negative CHECK ((payment_sweeps >= 0)),
    CONSTRAINT payments_processed_when_terminal CHECK (((status = 'pending'::text) = (processed_at IS NULL))),
    CONSTRAINT payments_status_valid CHECK ((status = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text]))),
    CONSTRAINT payments_webhook_attempts_non_negative CHECK ((webhook_attempts >= 0)),
    CONSTRAINT payments_webhook_chain_attempt_positive CHECK ((webhook_chain_attempt >= 1)),
    CONSTRAINT payments_webhook_chain_whole CHECK (((webhook_chain_message IS NULL) = (webhook_chain_attempt IS NULL))),
    CONSTRAINT payments_webhook_lease_whole CHECK (((webhook_lease_token IS NULL) = (webhook_lease_until IS NULL))),
    CONSTRAINT payments_webhook_sweeps_non_negative CHECK ((webhook_sweeps >= 0))
);

--
-- Name: payout_actions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.payout_actions (
    id bigint NOT NULL,
    payout_id uuid NOT NULL,
    action text NOT NULL,
    actor text NOT NULL,
    reason text NOT NULL,
    old_nonce bigint,
    new_nonce bigint,
    chain_evidence jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT payout_actions_action_valid CHECK ((action = ANY (ARRAY['void'::text, 'resign'::text, 'settle'::text]))),
    CONSTRAINT payout_actions_actor_length CHECK (((length(actor) >= 1) AND (length(actor) <= 200))),
    CONSTRAINT payout_actions_reason_length CHECK (((length(reason) >= 1) AND (length(reason) <= 2000)))
);

--
-- Name: payout_actions_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.payout_actions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: payout_actions_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.payout_actions_id_seq OWNED BY public.payout_actions.id;

--
-- Name: payout_hold_releases; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.payout_hold_releases (
    payout_id uuid NOT NULL,
    account_id uuid NOT NULL,
    released numeric(38,18) NOT NULL,
    released_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT payout_hold_releases_released_check CHECK ((released >= (0)::numeric))
);

--
-- Name: payout_txs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.payout_txs (
    payout_id uuid NOT NULL,
    attempt integer NOT NULL,
    chain text NOT NULL,
    hot_wallet text NOT NULL,
    nonce bigint NOT NULL,
    tx_hash text NOT NULL,
    raw_tx text NOT NULL,
    gas_limit bigint NOT NULL,
    max_fee_per_gas numeric(78,0) NOT NULL,
    max_priority_fee_per_gas numeric(78,0) NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    broadcast_at timestamp with time zone,
    CONSTRAINT payout_txs_attempt_positive CHECK ((attempt >= 1)),
    CONSTRAINT payout_txs_hash_format CHECK ((tx_hash ~ '^0x[0-9a-f]{64}$'::text))
);

--
-- Name: payouts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.payouts (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    merchant_id uuid NOT NULL,
    idempotency_key text NOT NULL,
    account_id uuid NOT NULL,
    asset text NOT NULL,
    chain text NOT NULL,
    to_address text NOT NULL,
    contract text,
    decimals smallint NOT NULL,
    amount numeric(38,18) NOT NULL,
    fee_hold numeric(38,18) NOT NULL,
    status text DEFAULT 'held'::text NOT NULL,
    hot_wallet text,
    nonce bigint,
    landed_tx_hash text,
    receipt_status smallint,
    block_number bigint,
    block_hash text,
    fee_paid numeric(38,18),
    wait_reason text,
    failure text,
    trace_id text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    signed_at timestamp with time zone,
    sent_at timestamp with time zone,
    finalized_at timestamp with time zone,
    stall text,
    stall_detail text,
    stalled_at timestamp with time zone,
    CONSTRAINT payouts_amount_positive CHECK ((amount > (0)::numeric)),
    CONSTRAINT payouts_contract_format CHECK ((contract ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT payouts_decimals_range CHECK (((decimals >= 0) AND (decimals <= 18))),
    CONSTRAINT payouts_fee_hold_non_negative CHECK ((fee_hold >= (0)::numeric)),
    CONSTRAINT payouts_fee_paid_non_negative CHECK ((fee_paid >= (0)::numeric)),
    CONSTRAINT payouts_final_has_time CHECK (((status = ANY (ARRAY['confirmed'::text, 'failed'::text])) = (finalized_at IS NOT NULL))),
    CONSTRAINT payouts_receipt_status_valid CHECK ((receipt_status = ANY (ARRAY[0, 1]))),
    CONSTRAINT payouts_signed_has_nonce CHECK (((status = 'held'::text) OR ((hot_wallet IS NOT NULL) AND (nonce IS NOT NULL)))),
    CONSTRAINT payouts_stall_has_time CHECK (((stall IS NULL) = (stalled_at IS NULL))),
    CONSTRAINT payouts_stall_open CHECK (((stall IS NULL) OR (status = ANY (ARRAY['signed'::text, 'sent'::text])))),
    CONSTRAINT payouts_stall_valid CHECK ((stall = ANY (ARRAY['unaccepted'::text, 'unmined'::text, 'nonce_taken'::text, 'transfer_mismatch'::text]))),
    CONSTRAINT payouts_status_valid CHECK ((status = ANY (ARRAY['held'::text, 'signed'::text, 'sent'::text, 'confirmed'::text, 'failed'::text]))),
    CONSTRAINT payouts_to_address_format CHECK ((to_address ~ '^0x[0-9a-f]{40}$'::text))
);

--
-- Name: processed_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.processed_events (
    idempotency_key text NOT NULL,
    event_id text NOT NULL,
    outcome text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT processed_events_outcome_valid CHECK ((outcome = ANY (ARRAY['pending'::text, 'success'::text, 'insufficient_funds'::text, 'account_frozen'::text, 'amount_overflow'::text])))
);

--
-- Name: provider_deliveries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.provider_deliveries (
    body_sha256 bytea NOT NULL,
    body bytea NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT provider_deliveries_digest_length CHECK ((length(body_sha256) = 32))
);

--
-- Name: state_gauges; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.state_gauges (
    id smallint DEFAULT 1 NOT NULL,
    computed_at timestamp with time zone NOT NULL,
    state jsonb NOT NULL,
    CONSTRAINT state_gauges_one_row CHECK ((id = 1))
);

--
-- Name: treasury_addresses; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.treasury_addresses (
    id bigint NOT NULL,
    chain text NOT NULL,
    address text NOT NULL,
    added_by text NOT NULL,
    added_at timestamp with time zone DEFAULT now() NOT NULL,
    removed_by text,
    removed_at timestamp with time zone,
    CONSTRAINT treasury_addresses_added_by_present CHECK (((length(added_by) >= 1) AND (length(added_by) <= 200))),
    CONSTRAINT treasury_addresses_address_format CHECK ((address ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT treasury_addresses_removed_by_present CHECK (((length(removed_by) >= 1) AND (length(removed_by) <= 200))),
    CONSTRAINT treasury_addresses_removed_with_who CHECK (((removed_at IS NULL) = (removed_by IS NULL)))
);

--
-- Name: treasury_addresses_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.treasury_addresses ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.treasury_addresses_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: unmatched_provider_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.unmatched_provider_events (
    event_id text NOT NULL,
    reason text NOT NULL,
    chain text NOT NULL,
    address text,
    asset text,
    amount text,
    tx_hash text,
    payload jsonb NOT NULL,
    trace_id text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    reviewed_at timestamp with time zone,
    delivery_sha256 bytea,
    "position" integer,
    detail text,
    CONSTRAINT unmatched_event_id_length CHECK (((length(event_id) >= 1) AND (length(event_id) <= 200))),
    CONSTRAINT unmatched_position_non_negative CHECK (("position" >= 0)),
    CONSTRAINT unmatched_reason_valid CHECK ((reason = ANY (ARRAY['unknown_address'::text, 'asset_mismatch'::text, 'unknown_asset'::text, 'unsupported'::text, 'unknown_token'::text, 'unknown_chain'::text, 'nft'::text, 'zero_value'::text, 'invalid'::text, 'ambiguous_id'::text, 'removed'::text, 'over_limit'::text])))
);

--
-- Name: webhook_attempt_log; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_attempt_log (
    id bigint NOT NULL,
    payment_id uuid NOT NULL,
    attempt integer NOT NULL,
    http_status smallint,
    error text,
    attempted_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT webhook_attempt_log_attempt_positive CHECK ((attempt >= 1)),
    CONSTRAINT webhook_attempt_log_error_length CHECK ((length(error) <= 2000)),
    CONSTRAINT webhook_attempt_log_http_status_range CHECK (((http_status IS NULL) OR ((http_status >= 100) AND (http_status <= 599))))
);

--
-- Name: webhook_attempt_log_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.webhook_attempt_log ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.webhook_attempt_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: webhook_deliveries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_deliveries (
    id bigint NOT NULL,
    event_id text NOT NULL,
    endpoint_id uuid NOT NULL,
    merchant_id uuid NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_token text,
    lease_until timestamp with time zone,
    last_http_status integer,
    delivered_at timestamp with time zone,
    dead_at timestamp with time zone,
    sweeps integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhook_deliveries_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT webhook_deliveries_delivered_time CHECK (((state = 'delivered'::text) = (delivered_at IS NOT NULL))),
    CONSTRAINT webhook_deliveries_state_valid CHECK ((state = ANY (ARRAY['pending'::text, 'delivered'::text, 'dead'::text])))
);

--
-- Name: webhook_deliveries_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.webhook_deliveries ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.webhook_deliveries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: webhook_delivery_attempts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_delivery_attempts (
    id bigint NOT NULL,
    delivery_id bigint NOT NULL,
    attempted_at timestamp with time zone DEFAULT now() NOT NULL,
    http_status integer,
    duration_ms integer NOT NULL,
    error text,
    CONSTRAINT webhook_delivery_attempts_duration_ms_check CHECK ((duration_ms >= 0)),
    CONSTRAINT webhook_delivery_attempts_error_check CHECK ((length(error) <= 500))
);

--
-- Name: webhook_delivery_attempts_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.webhook_delivery_attempts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.webhook_delivery_attempts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: webhook_endpoints; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_endpoints (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    merchant_id uuid NOT NULL,
    url text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    enabled_events text[] NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    secret text NOT NULL,
    previous_secret text,
    previous_secret_until timestamp with time zone,
    failing_since timestamp with time zone,
    disabled_at timestamp with time zone,
    disabled_reason text,
    deleted_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhook_endpoints_deleted_disabled CHECK (((deleted_at IS NULL) OR (NOT enabled))),
    CONSTRAINT webhook_endpoints_description_length CHECK ((length(description) <= 500)),
    CONSTRAINT webhook_endpoints_disabled_reason_valid CHECK ((disabled_reason = ANY (ARRAY['merchant'::text, 'failing'::text, 'deleted'::text]))),
    CONSTRAINT webhook_endpoints_events_valid CHECK ((((cardinality(enabled_events) >= 1) AND (cardinality(enabled_events) <= 20)) AND (array_position(enabled_events, NULL::text) IS NULL))),
    CONSTRAINT webhook_endpoints_previous_pair CHECK (((previous_secret IS NULL) = (previous_secret_until IS NULL))),
    CONSTRAINT webhook_endpoints_secret_format CHECK ((secret ~~ 'whsec\_%'::text)),
    CONSTRAINT webhook_endpoints_url_length CHECK (((length(url) >= 1) AND (length(url) <= 2048)))
);

--
-- Name: webhook_redeliveries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_redeliveries (
    id bigint NOT NULL,
    event_id text NOT NULL,
    endpoint_id uuid NOT NULL,
    delivery_id bigint,
    merchant_id uuid NOT NULL,
    requested_by text NOT NULL,
    requested_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhook_redeliveries_requested_by_check CHECK (((length(requested_by) >= 1) AND (length(requested_by) <= 300)))
);

--
-- Name: webhook_redeliveries_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.webhook_redeliveries ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.webhook_redeliveries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: chain_deposit_reports id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposit_reports ALTER COLUMN id SET DEFAULT nextval('public.chain_deposit_reports_id_seq'::regclass);

--
-- Name: dead_letter_queue id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dead_letter_queue ALTER COLUMN id SET DEFAULT nextval('public.dead_letter_queue_id_seq'::regclass);

--
-- Name: job_runs id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_runs ALTER COLUMN id SET DEFAULT nextval('public.job_runs_id_seq'::regclass);

--
-- Name: payout_actions id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payout_actions ALTER COLUMN id SET DEFAULT nextval('public.payout_actions_id_seq'::regclass);

--
-- Name: accounts accounts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.accounts
    ADD CONSTRAINT accounts_pkey PRIMARY KEY (id);

--
-- Name: alembic_version alembic_version_pkc; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);

--
-- Name: alerts alerts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alerts
    ADD CONSTRAINT alerts_pkey PRIMARY KEY (id);

--
-- Name: api_idempotency api_idempotency_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_idempotency
    ADD CONSTRAINT api_idempotency_pkey PRIMARY KEY (merchant_id, scope, key);

--
-- Name: api_keys api_keys_hash_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_hash_unique UNIQUE (key_hash);

--
-- Name: api_keys api_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

--
-- Name: assets assets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.assets
    ADD CONSTRAINT assets_pkey PRIMARY KEY (code);

--
-- Name: balance_events balance_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.balance_events
    ADD CONSTRAINT balance_events_pkey PRIMARY KEY (id);

--
-- Name: balance_events balance_events_source_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.balance_events
    ADD CONSTRAINT balance_events_source_unique UNIQUE (source_event_id, event_type);

--
-- Name: chain_deposit_reports chain_deposit_reports_once; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposit_reports
    ADD CONSTRAINT chain_deposit_reports_once UNIQUE (source, chain, tx_hash, claim);

--
-- Name: chain_deposit_reports chain_deposit_reports_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposit_reports
    ADD CONSTRAINT chain_deposit_reports_pkey PRIMARY KEY (id);

--
-- Name: chain_deposit_reports chain_deposit_reports_provider_id_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposit_reports
    ADD CONSTRAINT chain_deposit_reports_provider_id_unique UNIQUE (provider_event_id);

--
-- Name: chain_deposits chain_deposits_credit_event_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposits
    ADD CONSTRAINT chain_deposits_credit_event_id_key UNIQUE (credit_event_id);

--
-- Name: chain_deposits chain_deposits_identity; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposits
    ADD CONSTRAINT chain_deposits_identity UNIQUE (chain, tx_hash, "position");

--
-- Name: chain_deposits chain_deposits_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposits
    ADD CONSTRAINT chain_deposits_pkey PRIMARY KEY (transfer_id);

--
-- Name: chain_deposits chain_deposits_reversal_event_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposits
    ADD CONSTRAINT chain_deposits_reversal_event_id_key UNIQUE (reversal_event_id);

--
-- Name: chain_scanner_blocks chain_scanner_blocks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_scanner_blocks
    ADD CONSTRAINT chain_scanner_blocks_pkey PRIMARY KEY (chain, block_number);

--
-- Name: chain_scanner_cursors chain_scanner_cursors_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_scanner_cursors
    ADD CONSTRAINT chain_scanner_cursors_pkey PRIMARY KEY (chain);

--
-- Name: chain_tokens chain_tokens_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_tokens
    ADD CONSTRAINT chain_tokens_pkey PRIMARY KEY (chain, contract);

--
-- Name: chains chains_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chains
    ADD CONSTRAINT chains_pkey PRIMARY KEY (chain);

--
-- Name: charge_attempts charge_attempts_payment_attempt_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.charge_attempts
    ADD CONSTRAINT charge_attempts_payment_attempt_unique UNIQUE (payment_id, attempt);

--
-- Name: charge_attempts charge_attempts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.charge_attempts
    ADD CONSTRAINT charge_attempts_pkey PRIMARY KEY (attempt_id);

--
-- Name: console_sessions console_sessions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.console_sessions
    ADD CONSTRAINT console_sessions_pkey PRIMARY KEY (token_sha256);

--
-- Name: dead_letter_queue dead_letter_queue_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.dead_letter_queue
    ADD CONSTRAINT dead_letter_queue_pkey PRIMARY KEY (id);

--
-- Name: deposit_address_counters deposit_address_counters_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.deposit_address_counters
    ADD CONSTRAINT deposit_address_counters_pkey PRIMARY KEY (chain);

--
-- Name: deposit_addresses deposit_addresses_derivation_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.deposit_addresses
    ADD CONSTRAINT deposit_addresses_derivation_unique UNIQUE (chain, derivation_index);

--
-- Name: deposit_addresses deposit_addresses_derive_key_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.deposit_addresses
    ADD CONSTRAINT deposit_addresses_derive_key_unique UNIQUE (derived_by, derive_key);

--
-- Name: deposit_addresses deposit_addresses_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.deposit_addresses
    ADD CONSTRAINT deposit_addresses_pkey PRIMARY KEY (chain, address);

--
-- Name: hot_wallets hot_wallets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.hot_wallets
    ADD CONSTRAINT hot_wallets_pkey PRIMARY KEY (chain, address);

--
-- Name: job_runs job_runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_runs
    ADD CONSTRAINT job_runs_pkey PRIMARY KEY (id);

--
-- Name: ledger_accounts ledger_accounts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_accounts
    ADD CONSTRAINT ledger_accounts_pkey PRIMARY KEY (code);

--
-- Name: ledger_adjustments ledger_adjustments_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_adjustments
    ADD CONSTRAINT ledger_adjustments_pkey PRIMARY KEY (id);

--
-- Name: ledger_adjustments ledger_adjustments_reference_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_adjustments
    ADD CONSTRAINT ledger_adjustments_reference_unique UNIQUE (reference);

--
-- Name: ledger_adjustments ledger_adjustments_transfer_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_adjustments
    ADD CONSTRAINT ledger_adjustments_transfer_unique UNIQUE (transfer_id);

--
-- Name: ledger_legs ledger_legs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_legs
    ADD CONSTRAINT ledger_legs_pkey PRIMARY KEY (id);

--
-- Name: ledger_transfers ledger_transfers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_transfers
    ADD CONSTRAINT ledger_transfers_pkey PRIMARY KEY (id);

--
-- Name: ledger_transfers ledger_transfers_reference_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_transfers
    ADD CONSTRAINT ledger_transfers_reference_unique UNIQUE (kind, reference);

--
-- Name: merchant_events merchant_events_once; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.merchant_events
    ADD CONSTRAINT merchant_events_once UNIQUE (type, subject_id);

--
-- Name: merchant_events merchant_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.merchant_events
    ADD CONSTRAINT merchant_events_pkey PRIMARY KEY (id);

--
-- Name: merchants merchants_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.merchants
    ADD CONSTRAINT merchants_pkey PRIMARY KEY (id);

--
-- Name: outbox outbox_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_pkey PRIMARY KEY (id);

--
-- Name: payment_events payment_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payment_events
    ADD CONSTRAINT payment_events_pkey PRIMARY KEY (event_id);

--
-- Name: payments payments_merchant_idempotency_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payments
    ADD CONSTRAINT payments_merchant_idempotency_unique UNIQUE (merchant_id, idempotency_key);

--
-- Name: payments payments_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payments
    ADD CONSTRAINT payments_pkey PRIMARY KEY (id);

--
-- Name: payout_actions payout_actions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payout_actions
    ADD CONSTRAINT payout_actions_pkey PRIMARY KEY (id);

--
-- Name: payout_hold_releases payout_hold_releases_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payout_hold_releases
    ADD CONSTRAINT payout_hold_releases_pkey PRIMARY KEY (payout_id);

--
-- Name: payout_txs payout_txs_hash_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payout_txs
    ADD CONSTRAINT payout_txs_hash_unique UNIQUE (tx_hash);

--
-- Name: payout_txs payout_txs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payout_txs
    ADD CONSTRAINT payout_txs_pkey PRIMARY KEY (payout_id, attempt);

--
-- Name: payouts payouts_idempotency_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_idempotency_unique UNIQUE (merchant_id, idempotency_key);

--
-- Name: payouts payouts_nonce_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_nonce_unique UNIQUE (chain, hot_wallet, nonce);

--
-- Name: payouts payouts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_pkey PRIMARY KEY (id);

--
-- Name: processed_events processed_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.processed_events
    ADD CONSTRAINT processed_events_pkey PRIMARY KEY (idempotency_key);

--
-- Name: provider_deliveries provider_deliveries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.provider_deliveries
    ADD CONSTRAINT provider_deliveries_pkey PRIMARY KEY (body_sha256);

--
-- Name: state_gauges state_gauges_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.state_gauges
    ADD CONSTRAINT state_gauges_pkey PRIMARY KEY (id);

--
-- Name: treasury_addresses treasury_addresses_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.treasury_addresses
    ADD CONSTRAINT treasury_addresses_pkey PRIMARY KEY (id);

--
-- Name: unmatched_provider_events unmatched_provider_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unmatched_provider_events
    ADD CONSTRAINT unmatched_provider_events_pkey PRIMARY KEY (event_id);

--
-- Name: webhook_attempt_log webhook_attempt_log_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_attempt_log
    ADD CONSTRAINT webhook_attempt_log_pkey PRIMARY KEY (id);

--
-- Name: webhook_deliveries webhook_deliveries_once; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_once UNIQUE (event_id, endpoint_id);

--
-- Name: webhook_deliveries webhook_deliveries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id);

--
-- Name: webhook_delivery_attempts webhook_delivery_attempts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_delivery_attempts
    ADD CONSTRAINT webhook_delivery_attempts_pkey PRIMARY KEY (id);

--
-- Name: webhook_endpoints webhook_endpoints_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (id);

--
-- Name: webhook_redeliveries webhook_redeliveries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_redeliveries
    ADD CONSTRAINT webhook_redeliveries_pkey PRIMARY KEY (id);

--
-- Name: accounts_merchant_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX accounts_merchant_idx ON public.accounts USING btree (merchant_id) WHERE (merchant_id IS NOT NULL);

--
-- Name: accounts_merchant_settlement_unique; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX accounts_merchant_settlement_unique ON public.accounts USING btree (merchant_id, asset) WHERE settlement;

--
-- Name: alerts_by_last_seen; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX alerts_by_last_seen ON public.alerts USING btree (last_seen DESC);

--
-- Name: alerts_one_open_per_key; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX alerts_one_open_per_key ON public.alerts USING btree (key) WHERE (resolved_at IS NULL);

--
-- Name: api_idempotency_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX api_idempotency_created_idx ON public.api_idempotency USING btree (created_at);

--
-- Name: api_keys_merchant_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX api_keys_merchant_idx ON public.api_keys USING btree (merchant_id, created_at, id);

--
-- Name: balance_events_account_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX balance_events_account_idx ON public.balance_events USING btree (account_id, id);

--
-- Name: balance_events_created_brin; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX balance_events_created_brin ON public.balance_events USING brin (created_at);

--
-- Name: chain_deposit_reports_account; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX chain_deposit_reports_account ON public.chain_deposit_reports USING btree (account_id) WHERE (status = 'pending'::text);

--
-- Name: chain_deposit_reports_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX chain_deposit_reports_due ON public.chain_deposit_reports USING btree (next_check_at) WHERE (status = 'pending'::text);

--
-- Name: chain_deposit_reports_refuted; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX chain_deposit_reports_refuted ON public.chain_deposit_reports USING btree (created_at) WHERE (status = 'refuted'::text);

--
-- Name: chain_deposits_credited; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX chain_deposits_credited ON public.chain_deposits USING btree (chain, block_number) WHERE (status = 'credited'::text);

--
-- Name: chain_deposits_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX chain_deposits_due ON public.chain_deposits USING btree (next_check_at) WHERE (status = ANY (ARRAY['verified'::text, 'orphaned'::text]));

--
-- Name: chain_deposits_pending; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX chain_deposits_pending ON public.chain_deposits USING btree (account_id) WHERE (status = 'verified'::text);

--
-- Name: charge_attempts_needs_review_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX charge_attempts_needs_review_idx ON public.charge_attempts USING btree (claimed_at) WHERE (state = 'needs_review'::text);

--
-- Name: charge_attempts_one_answer; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX charge_attempts_one_answer ON public.charge_attempts USING btree (payment_id) WHERE (state = ANY (ARRAY['approved'::text, 'declined'::text]));

--
-- Name: charge_attempts_one_open; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX charge_attempts_one_open ON public.charge_attempts USING btree (payment_id) WHERE (state = ANY (ARRAY['claimed'::text, 'needs_review'::text]));

--
-- Name: console_sessions_expires_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX console_sessions_expires_idx ON public.console_sessions USING btree (expires_at);

--
-- Name: dead_letter_queue_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX dead_letter_queue_created_idx ON public.dead_letter_queue USING btree (created_at);

--
-- Name: dead_letter_queue_subject_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX dead_letter_queue_subject_idx ON public.dead_letter_queue USING btree (source, subject_id);

--
-- Name: dead_letter_queue_unresolved_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX dead_letter_queue_unresolved_idx ON public.dead_letter_queue USING btree (created_at) WHERE (resolved_at IS NULL);

--
-- Name: deposit_addresses_account_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX deposit_addresses_account_idx ON public.deposit_addresses USING btree (account_id);

--
-- Name: job_runs_job_started_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX job_runs_job_started_idx ON public.job_runs USING btree (job, started_at DESC);

--
-- Name: job_runs_started_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX job_runs_started_idx ON public.job_runs USING btree (started_at);

--
-- Name: ledger_legs_account_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ledger_legs_account_idx ON public.ledger_legs USING btree (account_id, id) WHERE (account_id IS NOT NULL);

--
-- Name: ledger_legs_event_leg_unique; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX ledger_legs_event_leg_unique ON public.ledger_legs USING btree (source_event_id) WHERE (source_event_id IS NOT NULL);

--
-- Name: ledger_legs_ledger_account_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ledger_legs_ledger_account_idx ON public.ledger_legs USING btree (ledger_account, id) WHERE (ledger_account IS NOT NULL);

--
-- Name: ledger_legs_transfer_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ledger_legs_transfer_idx ON public.ledger_legs USING btree (transfer_id) WHERE (transfer_id IS NOT NULL);

--
-- Name: merchant_events_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX merchant_events_created_idx ON public.merchant_events USING btree (created_at);

--
-- Name: merchant_events_merchant_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX merchant_events_merchant_idx ON public.merchant_events USING btree (merchant_id, created_at, id);

--
-- Name: outbox_due_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_due_idx ON public.outbox USING btree (next_attempt_at, id) WHERE (published_at IS NULL);

--
-- Name: outbox_published_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_published_idx ON public.outbox USING btree (published_at) WHERE (published_at IS NOT NULL);

--
-- Name: payment_events_account_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payment_events_account_idx ON public.payment_events USING btree (account_id);

--
-- Name: payment_events_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payment_events_created_idx ON public.payment_events USING btree (created_at, event_id);

--
-- Name: payment_events_enqueued_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payment_events_enqueued_idx ON public.payment_events USING btree (updated_at) WHERE (status = 'enqueued'::text);

--
-- Name: payment_events_pending_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payment_events_pending_idx ON public.payment_events USING btree (created_at) WHERE (status = 'pending'::text);

--
-- Name: payment_events_processing_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payment_events_processing_idx ON public.payment_events USING btree (updated_at) WHERE (status = 'processing'::text);

--
-- Name: payment_events_updated_brin; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payment_events_updated_brin ON public.payment_events USING brin (updated_at);

--
-- Name: payments_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payments_created_idx ON public.payments USING btree (created_at, id);

--
-- Name: payments_merchant_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payments_merchant_created_idx ON public.payments USING btree (merchant_id, created_at DESC, id DESC);

--
-- Name: payments_pending_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payments_pending_created_idx ON public.payments USING btree (created_at) WHERE (status = 'pending'::text);

--
-- Name: payments_processed_brin; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payments_processed_brin ON public.payments USING brin (processed_at);

--
-- Name: payments_webhook_sweep_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payments_webhook_sweep_idx ON public.payments USING btree (processed_at) WHERE ((webhook_delivered_at IS NULL) AND (webhook_dead_at IS NULL) AND (webhook_url IS NOT NULL) AND (status <> 'pending'::text));

--
-- Name: payout_actions_payout; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payout_actions_payout ON public.payout_actions USING btree (payout_id, id);

--
-- Name: payouts_account; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payouts_account ON public.payouts USING btree (account_id, created_at);

--
-- Name: payouts_open; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX payouts_open ON public.payouts USING btree (created_at) WHERE (status = ANY (ARRAY['held'::text, 'signed'::text, 'sent'::text]));

--
-- Name: processed_events_created_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX processed_events_created_idx ON public.processed_events USING btree (created_at);

--
-- Name: processed_events_pending_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX processed_events_pending_idx ON public.processed_events USING btree (created_at) WHERE (outcome = 'pending'::text);

--
-- Name: treasury_addresses_active; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX treasury_addresses_active ON public.treasury_addresses USING btree (chain, address) WHERE (removed_at IS NULL);

--
-- Name: unmatched_provider_events_open_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unmatched_provider_events_open_idx ON public.unmatched_provider_events USING btree (created_at) WHERE (reviewed_at IS NULL);

--
-- Name: webhook_attempt_log_attempted_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_attempt_log_attempted_idx ON public.webhook_attempt_log USING btree (attempted_at);

--
-- Name: webhook_attempt_log_payment_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_attempt_log_payment_idx ON public.webhook_attempt_log USING btree (payment_id, id);

--
-- Name: webhook_deliveries_endpoint_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_endpoint_idx ON public.webhook_deliveries USING btree (endpoint_id, id);

--
-- Name: webhook_deliveries_pending_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_pending_idx ON public.webhook_deliveries USING btree (next_attempt_at) WHERE (state = 'pending'::text);

--
-- Name: webhook_delivery_attempts_delivery_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_delivery_attempts_delivery_idx ON public.webhook_delivery_attempts USING btree (delivery_id, id);

--
-- Name: webhook_endpoints_merchant_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_endpoints_merchant_idx ON public.webhook_endpoints USING btree (merchant_id, created_at);

--
-- Name: webhook_redeliveries_event_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_redeliveries_event_idx ON public.webhook_redeliveries USING btree (event_id);

--
-- Name: balance_events balance_events_balanced; Type: TRIGGER; Schema: public; Owner: -
--

CREATE CONSTRAINT TRIGGER balance_events_balanced AFTER INSERT ON public.balance_events DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.ledger_posting_balanced();

--
-- Name: balance_events balance_events_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER balance_events_no_truncate BEFORE TRUNCATE ON public.balance_events FOR EACH STATEMENT EXECUTE FUNCTION public.balance_events_append_only();

--
-- Name: balance_events balance_events_no_update_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER balance_events_no_update_delete BEFORE DELETE OR UPDATE ON public.balance_events FOR EACH ROW EXECUTE FUNCTION public.balance_events_append_only();

--
-- Name: ledger_adjustments ledger_adjustments_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER ledger_adjustments_no_truncate BEFORE TRUNCATE ON public.ledger_adjustments FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_append_only();

--
-- Name: ledger_adjustments ledger_adjustments_no_update_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER ledger_adjustments_no_update_delete BEFORE DELETE OR UPDATE ON public.ledger_adjustments FOR EACH ROW EXECUTE FUNCTION public.ledger_append_only();

--
-- Name: ledger_legs ledger_legs_balanced; Type: TRIGGER; Schema: public; Owner: -
--

CREATE CONSTRAINT TRIGGER ledger_legs_balanced AFTER INSERT ON public.ledger_legs DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((new.transfer_id IS NOT NULL)) EXECUTE FUNCTION public.ledger_posting_balanced();

--
-- Name: ledger_legs ledger_legs_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER ledger_legs_no_truncate BEFORE TRUNCATE ON public.ledger_legs FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_append_only();

--
-- Name: ledger_legs ledger_legs_no_update_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER ledger_legs_no_update_delete BEFORE DELETE OR UPDATE ON public.ledger_legs FOR EACH ROW EXECUTE FUNCTION public.ledger_append_only();

--
-- Name: ledger_transfers ledger_transfers_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER ledger_transfers_no_truncate BEFORE TRUNCATE ON public.ledger_transfers FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_append_only();

--
-- Name: ledger_transfers ledger_transfers_no_update_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER ledger_transfers_no_update_delete BEFORE DELETE OR UPDATE ON public.ledger_transfers FOR EACH ROW EXECUTE FUNCTION public.ledger_append_only();

--
-- Name: accounts accounts_asset_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.accounts
    ADD CONSTRAINT accounts_asset_fkey FOREIGN KEY (asset) REFERENCES public.assets(code);

--
-- Name: accounts accounts_merchant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.accounts
    ADD CONSTRAINT accounts_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES public.merchants(id);

--
-- Name: api_idempotency api_idempotency_merchant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_idempotency
    ADD CONSTRAINT api_idempotency_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES public.merchants(id);

--
-- Name: api_keys api_keys_merchant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES public.merchants(id);

--
-- Name: balance_events balance_events_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.balance_events
    ADD CONSTRAINT balance_events_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);

--
-- Name: balance_events balance_events_source_event_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.balance_events
    ADD CONSTRAINT balance_events_source_event_id_fkey FOREIGN KEY (source_event_id) REFERENCES public.payment_events(event_id);

--
-- Name: chain_deposit_reports chain_deposit_reports_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposit_reports
    ADD CONSTRAINT chain_deposit_reports_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);

--
-- Name: chain_deposit_reports chain_deposit_reports_chain_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposit_reports
    ADD CONSTRAINT chain_deposit_reports_chain_fkey FOREIGN KEY (chain) REFERENCES public.chains(chain);

--
-- Name: chain_deposit_reports chain_deposit_reports_transfer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposit_reports
    ADD CONSTRAINT chain_deposit_reports_transfer_id_fkey FOREIGN KEY (transfer_id) REFERENCES public.chain_deposits(transfer_id);

--
-- Name: chain_deposits chain_deposits_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposits
    ADD CONSTRAINT chain_deposits_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);

--
-- Name: chain_deposits chain_deposits_asset_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposits
    ADD CONSTRAINT chain_deposits_asset_fkey FOREIGN KEY (asset) REFERENCES public.assets(code);

--
-- Name: chain_deposits chain_deposits_chain_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_deposits
    ADD CONSTRAINT chain_deposits_chain_fkey FOREIGN KEY (chain) REFERENCES public.chains(chain);

--
-- Name: chain_tokens chain_tokens_asset_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_tokens
    ADD CONSTRAINT chain_tokens_asset_fkey FOREIGN KEY (asset) REFERENCES public.assets(code);

--
-- Name: chain_tokens chain_tokens_chain_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chain_tokens
    ADD CONSTRAINT chain_tokens_chain_fkey FOREIGN KEY (chain) REFERENCES public.chains(chain);

--
-- Name: chains chains_native_asset_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.chains
    ADD CONSTRAINT chains_native_asset_fkey FOREIGN KEY (native_asset) REFERENCES public.assets(code);

--
-- Name: charge_attempts charge_attempts_payment_fk; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.charge_attempts
    ADD CONSTRAINT charge_attempts_payment_fk FOREIGN KEY (payment_id) REFERENCES public.payments(id);

--
-- Name: console_sessions console_sessions_api_key_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.console_sessions
    ADD CONSTRAINT console_sessions_api_key_id_fkey FOREIGN KEY (api_key_id) REFERENCES public.api_keys(id);

--
-- Name: console_sessions console_sessions_merchant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.console_sessions
    ADD CONSTRAINT console_sessions_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES public.merchants(id) ON DELETE CASCADE;

--
-- Name: deposit_addresses deposit_addresses_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.deposit_addresses
    ADD CONSTRAINT deposit_addresses_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);

--
-- Name: hot_wallets hot_wallets_chain_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.hot_wallets
    ADD CONSTRAINT hot_wallets_chain_fkey FOREIGN KEY (chain) REFERENCES public.chains(chain);

--
-- Name: ledger_accounts ledger_accounts_asset_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_accounts
    ADD CONSTRAINT ledger_accounts_asset_fkey FOREIGN KEY (asset) REFERENCES public.assets(code);

--
-- Name: ledger_adjustments ledger_adjustments_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_adjustments
    ADD CONSTRAINT ledger_adjustments_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);

--
-- Name: ledger_adjustments ledger_adjustments_against_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_adjustments
    ADD CONSTRAINT ledger_adjustments_against_fkey FOREIGN KEY (against) REFERENCES public.ledger_accounts(code);

--
-- Name: ledger_adjustments ledger_adjustments_asset_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_adjustments
    ADD CONSTRAINT ledger_adjustments_asset_fkey FOREIGN KEY (asset) REFERENCES public.assets(code);

--
-- Name: ledger_adjustments ledger_adjustments_ledger_account_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_adjustments
    ADD CONSTRAINT ledger_adjustments_ledger_account_fkey FOREIGN KEY (ledger_account) REFERENCES public.ledger_accounts(code);

--
-- Name: ledger_adjustments ledger_adjustments_transfer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_adjustments
    ADD CONSTRAINT ledger_adjustments_transfer_id_fkey FOREIGN KEY (transfer_id) REFERENCES public.ledger_transfers(id);

--
-- Name: ledger_legs ledger_legs_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_legs
    ADD CONSTRAINT ledger_legs_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);

--
-- Name: ledger_legs ledger_legs_event_customer_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_legs
    ADD CONSTRAINT ledger_legs_event_customer_fkey FOREIGN KEY (source_event_id, kind) REFERENCES public.balance_events(source_event_id, event_type);

--
-- Name: ledger_legs ledger_legs_transfer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_legs
    ADD CONSTRAINT ledger_legs_transfer_id_fkey FOREIGN KEY (transfer_id) REFERENCES public.ledger_transfers(id);

--
-- Name: merchant_events merchant_events_merchant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.merchant_events
    ADD CONSTRAINT merchant_events_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES public.merchants(id);

--
-- Name: payment_events payment_events_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payment_events
    ADD CONSTRAINT payment_events_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);

--
-- Name: payments payments_currency_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payments
    ADD CONSTRAINT payments_currency_fkey FOREIGN KEY (currency) REFERENCES public.assets(code);

--
-- Name: payments payments_merchant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payments
    ADD CONSTRAINT payments_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES public.merchants(id);

--
-- Name: payout_actions payout_actions_payout_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payout_actions
    ADD CONSTRAINT payout_actions_payout_id_fkey FOREIGN KEY (payout_id) REFERENCES public.payouts(id);

--
-- Name: payout_hold_releases payout_hold_releases_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payout_hold_releases
    ADD CONSTRAINT payout_hold_releases_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);

--
-- Name: payout_hold_releases payout_hold_releases_payout_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payout_hold_releases
    ADD CONSTRAINT payout_hold_releases_payout_id_fkey FOREIGN KEY (payout_id) REFERENCES public.payouts(id);

--
-- Name: payout_txs payout_txs_payout_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payout_txs
    ADD CONSTRAINT payout_txs_payout_id_fkey FOREIGN KEY (payout_id) REFERENCES public.payouts(id);

--
-- Name: payouts payouts_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);

--
-- Name: payouts payouts_asset_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_asset_fkey FOREIGN KEY (asset) REFERENCES public.assets(code);

--
-- Name: payouts payouts_chain_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_chain_fkey FOREIGN KEY (chain) REFERENCES public.chains(chain);

--
-- Name: treasury_addresses treasury_addresses_chain_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.treasury_addresses
    ADD CONSTRAINT treasury_addresses_chain_fkey FOREIGN KEY (chain) REFERENCES public.chains(chain);

--
-- Name: unmatched_provider_events unmatched_provider_events_delivery_sha256_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unmatched_provider_events
    ADD CONSTRAINT unmatched_provider_events_delivery_sha256_fkey FOREIGN KEY (delivery_sha256) REFERENCES public.provider_deliveries(body_sha256);

--
-- Name: webhook_attempt_log webhook_attempt_log_payment_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_attempt_log
    ADD CONSTRAINT webhook_attempt_log_payment_id_fkey FOREIGN KEY (payment_id) REFERENCES public.payments(id);

--
-- Name: webhook_deliveries webhook_deliveries_endpoint_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.webhook_endpoints(id);

--
-- Name: webhook_deliveries webhook_deliveries_event_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES public.merchant_events(id) ON DELETE CASCADE;

--
-- Name: webhook_deliveries webhook_deliveries_merchant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES public.merchants(id);

--
-- Name: webhook_delivery_attempts webhook_delivery_attempts_delivery_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_delivery_attempts
    ADD CONSTRAINT webhook_delivery_attempts_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES public.webhook_deliveries(id) ON DELETE CASCADE;

--
-- Name: webhook_endpoints webhook_endpoints_merchant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_endpoints
    ADD CONSTRAINT webhook_endpoints_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES public.merchants(id);

--
-- Name: webhook_redeliveries webhook_redeliveries_delivery_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_redeliveries
    ADD CONSTRAINT webhook_redeliveries_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES public.webhook_deliveries(id) ON DELETE SET NULL;

--
-- Name: webhook_redeliveries webhook_redeliveries_endpoint_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_redeliveries
    ADD CONSTRAINT webhook_redeliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.webhook_endpoints(id);

--
-- Name: webhook_redeliveries webhook_redeliveries_merchant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_redeliveries
    ADD CONSTRAINT webhook_redeliveries_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES public.merchants(id);

--
-- Name: SCHEMA public; Type: ACL; Schema: -; Owner: -
--

GRANT USAGE ON SCHEMA public TO payflow_app;

--
-- Name: FUNCTION cleanup_merchant_events(min_age_days integer, batch_size integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.cleanup_merchant_events(min_age_days integer, batch_size integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.cleanup_merchant_events(min_age_days integer, batch_size integer) TO payflow_app;

--
-- Name: FUNCTION cleanup_processed_events(min_age_days integer, batch_size integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.cleanup_processed_events(min_age_days integer, batch_size integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.cleanup_processed_events(min_age_days integer, batch_size integer) TO payflow_app;

--
-- Name: FUNCTION cleanup_webhook_attempt_log(min_age_days integer, batch_size integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.cleanup_webhook_attempt_log(min_age_days integer, batch_size integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.cleanup_webhook_attempt_log(min_age_days integer, batch_size integer) TO payflow_app;

--
-- Name: FUNCTION ledger_account(p_kind text, p_chain text, p_asset text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_account(p_kind text, p_chain text, p_asset text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_account(p_kind text, p_chain text, p_asset text) TO payflow_app;

--
-- Name: FUNCTION ledger_apply_balance_change(p_account uuid, p_delta numeric, p_type text, p_event_id text, p_active_only boolean); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_apply_balance_change(p_account uuid, p_delta numeric, p_type text, p_event_id text, p_active_only boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_apply_balance_change(p_account uuid, p_delta numeric, p_type text, p_event_id text, p_active_only boolean) TO payflow_app;

--
-- Name: FUNCTION ledger_counterparty(p_event_id text, p_type text, p_asset text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_counterparty(p_event_id text, p_type text, p_asset text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_counterparty(p_event_id text, p_type text, p_asset text) TO payflow_app;

--
-- Name: FUNCTION ledger_place_hold(p_account uuid, p_amount numeric); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_place_hold(p_account uuid, p_amount numeric) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_place_hold(p_account uuid, p_amount numeric) TO payflow_app;

--
-- Name: FUNCTION ledger_post_adjustment(p_account text, p_against text, p_amount numeric, p_reason text, p_by text, p_reference text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_post_adjustment(p_account text, p_against text, p_amount numeric, p_reason text, p_by text, p_reference text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_post_adjustment(p_account text, p_against text, p_amount numeric, p_reason text, p_by text, p_reference text) TO payflow_app;

--
-- Name: FUNCTION ledger_post_network_fee(p_chain text, p_tx_hash text, p_amount numeric); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_post_network_fee(p_chain text, p_tx_hash text, p_amount numeric) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_post_network_fee(p_chain text, p_tx_hash text, p_amount numeric) TO payflow_app;

--
-- Name: FUNCTION ledger_post_opening(p_account uuid, p_amount numeric); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_post_opening(p_account uuid, p_amount numeric) FROM PUBLIC;

--
-- Name: FUNCTION ledger_post_reorg_recovery(p_reference text, p_transfer_id text, p_amount numeric); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_post_reorg_recovery(p_reference text, p_transfer_id text, p_amount numeric) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_post_reorg_recovery(p_reference text, p_transfer_id text, p_amount numeric) TO payflow_app;

--
-- Name: FUNCTION ledger_post_reorg_shortfall(p_reference text, p_transfer_id text, p_amount numeric); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_post_reorg_shortfall(p_reference text, p_transfer_id text, p_amount numeric) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_post_reorg_shortfall(p_reference text, p_transfer_id text, p_amount numeric) TO payflow_app;

--
-- Name: FUNCTION ledger_post_success(p_key text, p_event_id text, p_sources text[], p_credit_types text[], p_active_types text[], p_lock_timeout_ms integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_post_success(p_key text, p_event_id text, p_sources text[], p_credit_types text[], p_active_types text[], p_lock_timeout_ms integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_post_success(p_key text, p_event_id text, p_sources text[], p_credit_types text[], p_active_types text[], p_lock_timeout_ms integer) TO payflow_app;

--
-- Name: FUNCTION ledger_post_system_transfer(p_kind text, p_reference text, p_debit text, p_credit text, p_amount numeric); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_post_system_transfer(p_kind text, p_reference text, p_debit text, p_credit text, p_amount numeric) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_post_system_transfer(p_kind text, p_reference text, p_debit text, p_credit text, p_amount numeric) TO payflow_app;

--
-- Name: FUNCTION ledger_posting_key(p_event_id text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_posting_key(p_event_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_posting_key(p_event_id text) TO payflow_app;

--
-- Name: FUNCTION ledger_release_payout_hold(p_payout uuid); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_release_payout_hold(p_payout uuid) FROM PUBLIC;
GRANT ALL ON FUNCTION public.ledger_release_payout_hold(p_payout uuid) TO payflow_app;

--
-- Name: FUNCTION merchant_event_record(p_merchant uuid, p_type text, p_subject text, p_data jsonb); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.merchant_event_record(p_merchant uuid, p_type text, p_subject text, p_data jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION public.merchant_event_record(p_merchant uuid, p_type text, p_subject text, p_data jsonb) TO payflow_app;

--
-- Name: FUNCTION merchant_event_record_leasing(p_merchant uuid, p_type text, p_subject text, p_data jsonb, p_lease_token text, p_lease_s double precision, OUT o_event_id text, OUT o_deliveries bigint[], OUT o_jobs bigint[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.merchant_event_record_leasing(p_merchant uuid, p_type text, p_subject text, p_data jsonb, p_lease_token text, p_lease_s double precision, OUT o_event_id text, OUT o_deliveries bigint[], OUT o_jobs bigint[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.merchant_event_record_leasing(p_merchant uuid, p_type text, p_subject text, p_data jsonb, p_lease_token text, p_lease_s double precision, OUT o_event_id text, OUT o_deliveries bigint[], OUT o_jobs bigint[]) TO payflow_app;

--
-- Name: FUNCTION payflow_grant_extra_0013_chain_deposits(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0013_chain_deposits(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0014_chain_scanner(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0014_chain_scanner(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0015_payouts(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0015_payouts(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0016_webhook_leases(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0016_webhook_leases(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0017_console(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0017_console(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0018_webhook_chains(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0018_webhook_chains(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0019_attempt_log_retention(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0019_attempt_log_retention(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0020_one_statement_posting(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0020_one_statement_posting(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0023_state_gauges(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0023_state_gauges(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0026_payout_stalls(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0026_payout_stalls(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0029_double_entry_books(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0029_double_entry_books(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0030_treasury_sweeps(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0030_treasury_sweeps(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0031_gas_shortfall_adjustments(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0031_gas_shortfall_adjustments(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0032_definer_postings(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0032_definer_postings(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0034_hold_released_once(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0034_hold_released_once(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0035_merchant_events(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0035_merchant_events(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0037_event_emission(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0037_event_emission(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0038_api_keys(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0038_api_keys(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0039_webhook_endpoints(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0039_webhook_endpoints(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_extra_0040_endpoint_direct_sends(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_extra_0040_endpoint_direct_sends(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_hooks(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_hooks(app name) FROM PUBLIC;

--
-- Name: FUNCTION payflow_grant_service(app name); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payflow_grant_service(app name) FROM PUBLIC;

--
-- Name: FUNCTION payment_finalize(uuid, text, uuid, text, text, numeric, text, text, text, jsonb, text, jsonb, double precision, text, text, text, integer, text, double precision, text, text[], text[], text[], text, double precision, OUT o_finalized boolean, OUT o_credited boolean, OUT o_credit_job bigint, OUT o_held_webhook_job bigint, OUT o_balance_after numeric, OUT o_held_deliveries bigint[], OUT o_held_delivery_jobs bigint[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.payment_finalize(uuid, text, uuid, text, text, numeric, text, text, text, jsonb, text, jsonb, double precision, text, text, text, integer, text, double precision, text, text[], text[], text[], text, double precision, OUT o_finalized boolean, OUT o_credited boolean, OUT o_credit_job bigint, OUT o_held_webhook_job bigint, OUT o_balance_after numeric, OUT o_held_deliveries bigint[], OUT o_held_delivery_jobs bigint[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.payment_finalize(uuid, text, uuid, text, text, numeric, text, text, text, jsonb, text, jsonb, double precision, text, text, text, integer, text, double precision, text, text[], text[], text[], text, double precision, OUT o_finalized boolean, OUT o_credited boolean, OUT o_credit_job bigint, OUT o_held_webhook_job bigint, OUT o_balance_after numeric, OUT o_held_deliveries bigint[], OUT o_held_delivery_jobs bigint[]) TO payflow_app;

--
-- Name: TABLE accounts; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.accounts TO payflow_app;

--
-- Name: COLUMN accounts.id; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(id) ON TABLE public.accounts TO payflow_app;

--
-- Name: COLUMN accounts.asset; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(asset) ON TABLE public.accounts TO payflow_app;

--
-- Name: COLUMN accounts.status; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(status),UPDATE(status) ON TABLE public.accounts TO payflow_app;

--
-- Name: COLUMN accounts.created_at; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(created_at) ON TABLE public.accounts TO payflow_app;

--
-- Name: COLUMN accounts.updated_at; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(updated_at),UPDATE(updated_at) ON TABLE public.accounts TO payflow_app;

--
-- Name: COLUMN accounts.merchant_id; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(merchant_id) ON TABLE public.accounts TO payflow_app;

--
-- Name: COLUMN accounts.settlement; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(settlement) ON TABLE public.accounts TO payflow_app;

--
-- Name: TABLE alerts; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.alerts TO payflow_app;

--
-- Name: SEQUENCE alerts_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.alerts_id_seq TO payflow_app;

--
-- Name: TABLE api_idempotency; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.api_idempotency TO payflow_app;

--
-- Name: TABLE api_keys; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.api_keys TO payflow_app;

--
-- Name: COLUMN api_keys.merchant_id; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(merchant_id) ON TABLE public.api_keys TO payflow_app;

--
-- Name: COLUMN api_keys.name; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(name) ON TABLE public.api_keys TO payflow_app;

--
-- Name: COLUMN api_keys.scope; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(scope) ON TABLE public.api_keys TO payflow_app;

--
-- Name: COLUMN api_keys.key_hash; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(key_hash) ON TABLE public.api_keys TO payflow_app;

--
-- Name: COLUMN api_keys.hint; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(hint) ON TABLE public.api_keys TO payflow_app;

--
-- Name: COLUMN api_keys.expires_at; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(expires_at) ON TABLE public.api_keys TO payflow_app;

--
-- Name: COLUMN api_keys.revoked_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(revoked_at) ON TABLE public.api_keys TO payflow_app;

--
-- Name: COLUMN api_keys.last_used_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(last_used_at) ON TABLE public.api_keys TO payflow_app;

--
-- Name: TABLE assets; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.assets TO payflow_app;

--
-- Name: TABLE balance_events; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.balance_events TO payflow_app;

--
-- Name: SEQUENCE balance_events_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.balance_events_id_seq TO payflow_app;

--
-- Name: TABLE chain_deposit_reports; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.chain_deposit_reports TO payflow_app;

--
-- Name: SEQUENCE chain_deposit_reports_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.chain_deposit_reports_id_seq TO payflow_app;

--
-- Name: TABLE chain_deposits; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.chain_deposits TO payflow_app;

--
-- Name: TABLE chain_scanner_blocks; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.chain_scanner_blocks TO payflow_app;

--
-- Name: TABLE chain_scanner_cursors; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.chain_scanner_cursors TO payflow_app;

--
-- Name: TABLE chain_tokens; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.chain_tokens TO payflow_app;

--
-- Name: TABLE chains; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.chains TO payflow_app;

--
-- Name: TABLE charge_attempts; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.charge_attempts TO payflow_app;

--
-- Name: TABLE console_sessions; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.console_sessions TO payflow_app;

--
-- Name: TABLE dead_letter_queue; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.dead_letter_queue TO payflow_app;

--
-- Name: SEQUENCE dead_letter_queue_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.dead_letter_queue_id_seq TO payflow_app;

--
-- Name: TABLE deposit_address_counters; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.deposit_address_counters TO payflow_app;

--
-- Name: TABLE deposit_addresses; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.deposit_addresses TO payflow_app;

--
-- Name: TABLE hot_wallets; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.hot_wallets TO payflow_app;

--
-- Name: TABLE job_runs; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.job_runs TO payflow_app;

--
-- Name: SEQUENCE job_runs_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.job_runs_id_seq TO payflow_app;

--
-- Name: TABLE ledger_accounts; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.ledger_accounts TO payflow_app;

--
-- Name: TABLE ledger_adjustments; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.ledger_adjustments TO payflow_app;

--
-- Name: SEQUENCE ledger_adjustments_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.ledger_adjustments_id_seq TO payflow_app;

--
-- Name: TABLE ledger_legs; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.ledger_legs TO payflow_app;

--
-- Name: TABLE ledger_journal; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.ledger_journal TO payflow_app;

--
-- Name: SEQUENCE ledger_legs_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.ledger_legs_id_seq TO payflow_app;

--
-- Name: TABLE ledger_transfers; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.ledger_transfers TO payflow_app;

--
-- Name: SEQUENCE ledger_transfers_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.ledger_transfers_id_seq TO payflow_app;

--
-- Name: TABLE merchant_events; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.merchant_events TO payflow_app;

--
-- Name: TABLE merchants; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.merchants TO payflow_app;

--
-- Name: TABLE outbox; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.outbox TO payflow_app;

--
-- Name: SEQUENCE outbox_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.outbox_id_seq TO payflow_app;

--
-- Name: TABLE payment_events; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.payment_events TO payflow_app;

--
-- Name: COLUMN payment_events.status; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(status) ON TABLE public.payment_events TO payflow_app;

--
-- Name: COLUMN payment_events.retry_count; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(retry_count) ON TABLE public.payment_events TO payflow_app;

--
-- Name: COLUMN payment_events.last_error; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(last_error) ON TABLE public.payment_events TO payflow_app;

--
-- Name: COLUMN payment_events.updated_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(updated_at) ON TABLE public.payment_events TO payflow_app;

--
-- Name: TABLE payments; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.status; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(status) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.webhook_delivered_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(webhook_delivered_at) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.webhook_attempts; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(webhook_attempts) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.processed_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(processed_at) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.webhook_dead_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(webhook_dead_at) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.payment_sweeps; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(payment_sweeps) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.payment_swept_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(payment_swept_at) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.webhook_sweeps; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(webhook_sweeps) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.webhook_swept_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(webhook_swept_at) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.webhook_lease_token; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(webhook_lease_token) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.webhook_lease_until; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(webhook_lease_until) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.webhook_chain_message; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(webhook_chain_message) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.webhook_chain_attempt; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(webhook_chain_attempt) ON TABLE public.payments TO payflow_app;

--
-- Name: COLUMN payments.webhook_next_attempt_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(webhook_next_attempt_at) ON TABLE public.payments TO payflow_app;

--
-- Name: TABLE payout_actions; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.payout_actions TO payflow_app;

--
-- Name: SEQUENCE payout_actions_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.payout_actions_id_seq TO payflow_app;

--
-- Name: TABLE payout_hold_releases; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.payout_hold_releases TO payflow_app;

--
-- Name: TABLE payout_txs; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.payout_txs TO payflow_app;

--
-- Name: TABLE payouts; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.payouts TO payflow_app;

--
-- Name: TABLE processed_events; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.processed_events TO payflow_app;

--
-- Name: COLUMN processed_events.outcome; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(outcome) ON TABLE public.processed_events TO payflow_app;

--
-- Name: TABLE provider_deliveries; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.provider_deliveries TO payflow_app;

--
-- Name: TABLE state_gauges; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.state_gauges TO payflow_app;

--
-- Name: TABLE treasury_addresses; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.treasury_addresses TO payflow_app;

--
-- Name: COLUMN treasury_addresses.removed_by; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(removed_by) ON TABLE public.treasury_addresses TO payflow_app;

--
-- Name: COLUMN treasury_addresses.removed_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(removed_at) ON TABLE public.treasury_addresses TO payflow_app;

--
-- Name: SEQUENCE treasury_addresses_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.treasury_addresses_id_seq TO payflow_app;

--
-- Name: TABLE unmatched_provider_events; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.unmatched_provider_events TO payflow_app;

--
-- Name: TABLE webhook_attempt_log; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.webhook_attempt_log TO payflow_app;

--
-- Name: SEQUENCE webhook_attempt_log_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.webhook_attempt_log_id_seq TO payflow_app;

--
-- Name: TABLE webhook_deliveries; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.webhook_deliveries TO payflow_app;

--
-- Name: SEQUENCE webhook_deliveries_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.webhook_deliveries_id_seq TO payflow_app;

--
-- Name: TABLE webhook_delivery_attempts; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.webhook_delivery_attempts TO payflow_app;

--
-- Name: SEQUENCE webhook_delivery_attempts_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.webhook_delivery_attempts_id_seq TO payflow_app;

--
-- Name: TABLE webhook_endpoints; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.webhook_endpoints TO payflow_app;

--
-- Name: TABLE webhook_redeliveries; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.webhook_redeliveries TO payflow_app;

--
-- Name: SEQUENCE webhook_redeliveries_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,USAGE ON SEQUENCE public.webhook_redeliveries_id_seq TO payflow_app;

--
-- Name: DEFAULT PRIVILEGES FOR SEQUENCES; Type: DEFAULT ACL; Schema: public; Owner: -
--

ALTER DEFAULT PRIVILEGES FOR ROLE payflow_owner IN SCHEMA public GRANT SELECT,USAGE ON SEQUENCES  TO payflow_app;

--
-- Name: DEFAULT PRIVILEGES FOR TABLES; Type: DEFAULT ACL; Schema: public; Owner: -
--

ALTER DEFAULT PRIVILEGES FOR ROLE payflow_owner IN SCHEMA public GRANT SELECT,INSERT,DELETE,UPDATE ON TABLES  TO payflow_app;

--
-- PostgreSQL database dump complete
--
