-- The grant machinery's SQL functions as they are at the head revision
-- (payflow/db/functions.py), rewritten by `uv run python -m payflow.db.schema`.
-- `payflow migrate` (payflow/db/migrate.py, grant_service) calls payflow_grant_service,
-- then payflow_grant_hooks, which calls every payflow_grant_extra_<revision> in name order.
-- A new migration's grant hook is added here by the generator.

-- name: payflow_grant_service
-- The service role's privileges (migration 0009): DML on every table of schema public,
-- then each privilege the code does not need taken back.
CREATE OR REPLACE FUNCTION public.payflow_grant_service(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;

-- name: payflow_grant_hooks
-- Calls every payflow_grant_extra_<revision>(app) that exists, in name order (0012).
CREATE OR REPLACE FUNCTION public.payflow_grant_hooks(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;

-- name: payflow_grant_extra_0013_chain_deposits
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0013_chain_deposits(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
    BEGIN
        EXECUTE format('REVOKE DELETE, TRUNCATE ON chain_deposits FROM %I', app);
        EXECUTE format('REVOKE DELETE, TRUNCATE ON chain_deposit_reports FROM %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0014_chain_scanner
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0014_chain_scanner(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
    BEGIN
        EXECUTE format('REVOKE DELETE, TRUNCATE ON chain_scanner_cursors FROM %I', app);
        EXECUTE format('REVOKE DELETE, TRUNCATE ON deposit_address_counters FROM %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0015_payouts
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0015_payouts(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        EXECUTE format('GRANT UPDATE (held) ON public.accounts TO %I', app);
        EXECUTE format('REVOKE DELETE ON public.payouts, public.payout_txs, public.hot_wallets'
                       ' FROM %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0016_webhook_leases
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0016_webhook_leases(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        EXECUTE format('GRANT UPDATE (webhook_lease_token, webhook_lease_until)'
                       ' ON public.payments TO %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0017_console
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0017_console(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        EXECUTE format('REVOKE UPDATE, DELETE ON public.webhook_attempt_log FROM %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0018_webhook_chains
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0018_webhook_chains(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        EXECUTE format('GRANT UPDATE (webhook_chain_message, webhook_chain_attempt,'
                       ' webhook_next_attempt_at) ON public.payments TO %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0019_attempt_log_retention
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0019_attempt_log_retention(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.cleanup_webhook_attempt_log(integer,'
                       ' integer) TO %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0020_one_statement_posting
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0020_one_statement_posting(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.ledger_post_success(text, text, text[], text[], text[], integer) TO %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0023_state_gauges
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0023_state_gauges(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        EXECUTE format('REVOKE DELETE, TRUNCATE ON public.state_gauges FROM %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0026_payout_stalls
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0026_payout_stalls(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON public.payout_actions FROM %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0029_double_entry_books
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0029_double_entry_books(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        -- Append-only books; a system account is created, never changed.
        EXECUTE format('REVOKE UPDATE, DELETE ON public.ledger_legs, public.ledger_transfers,'
                       ' public.ledger_accounts FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.ledger_account(text, text, text),'
                       ' public.ledger_counterparty(text, text, text),'
                       ' public.ledger_post_opening(uuid, numeric) TO %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0030_treasury_sweeps
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0030_treasury_sweeps(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        -- an address is removed by setting removed_at/removed_by, never deleted
        EXECUTE format('REVOKE UPDATE, DELETE ON public.treasury_addresses FROM %I', app);
        EXECUTE format('GRANT UPDATE (removed_by, removed_at) ON public.treasury_addresses'
                       ' TO %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.ledger_post_system_transfer(text,'
                       ' text, text, text, numeric) TO %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0032_definer_postings
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0032_definer_postings(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;

-- name: payflow_grant_extra_0031_gas_shortfall_adjustments
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0031_gas_shortfall_adjustments(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;

-- name: payflow_grant_extra_0034_hold_released_once
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0034_hold_released_once(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        -- Read only: the release function (the owner) is the table's only writer.
        EXECUTE format('REVOKE ALL ON public.payout_hold_releases FROM %I', app);
        EXECUTE format('GRANT SELECT ON public.payout_hold_releases TO %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0035_merchant_events
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0035_merchant_events(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        -- Appended in the causing transaction and read; removed only by the retention job.
        EXECUTE format('REVOKE ALL ON public.merchant_events FROM %I', app);
        EXECUTE format('GRANT SELECT, INSERT ON public.merchant_events TO %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.cleanup_merchant_events(integer,'
                       ' integer) TO %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0037_event_emission
-- merchant_events: no direct INSERT; EXECUTE on merchant_event_record (0037).
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0037_event_emission(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        -- Events are recorded only through merchant_event_record (after 0035's hook,
        -- which granted INSERT: the hooks run in name order).
        EXECUTE format('REVOKE INSERT ON public.merchant_events FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.merchant_event_record(uuid, text, text, jsonb) TO %I', app);
    END
    $function$;

-- name: payflow_grant_extra_0038_api_keys
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0038_api_keys(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;

-- name: payflow_grant_extra_0039_webhook_endpoints
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0039_webhook_endpoints(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;

-- name: payflow_grant_extra_0040_endpoint_direct_sends
CREATE OR REPLACE FUNCTION public.payflow_grant_extra_0040_endpoint_direct_sends(app name)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.payment_finalize(uuid, text, uuid, text, text, numeric, text, text, text, jsonb, text, jsonb, double precision, text, text, text, integer, text, double precision, text, text[], text[], text[], text, double precision) TO %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.merchant_event_record_leasing(uuid, text, text, jsonb, text, double precision) TO %I', app);
    END
    $function$;
