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
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    DECLARE
        v_account uuid;
        v_amount numeric;
        v_type text;
        v_delta numeric;
        v_balance numeric;
    BEGIN
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

        v_delta := CASE WHEN v_type = ANY (p_credit_types) THEN v_amount ELSE -v_amount END;
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
        RETURN v_balance;
    END
    $function$;
