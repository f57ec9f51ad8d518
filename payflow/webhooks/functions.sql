-- The merchant event stream's SQL function as it is at the head revision
-- (payflow/db/functions.py), rewritten by `uv run python -m payflow.db.schema`.

-- name: cleanup_merchant_events
-- Deletes merchant events older than min_age_days (at least 1; EVENT_RETENTION_DAYS),
-- oldest first, at most batch_size (clamped to [1, 10000]) rows locked with SKIP LOCKED;
-- returns how many (SECURITY DEFINER, migration 0035; the retention job).
CREATE OR REPLACE FUNCTION public.cleanup_merchant_events(min_age_days integer, batch_size integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;

-- name: merchant_event_record
-- Records one event of merchant p_merchant (p_type one of the nine types, p_subject the
-- cause's id, p_data the event's `data` object) under a new `evt_` id and returns it;
-- NULL when (p_type, p_subject) was recorded already (merchant_events_once). The one way
-- into merchant_events (SECURITY DEFINER, migration 0037): the service role may call it,
-- never insert directly; payment_finalize and payflow.webhooks.record_event call it.
CREATE OR REPLACE FUNCTION public.merchant_event_record(p_merchant uuid, p_type text, p_subject text, p_data jsonb)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    DECLARE
        v_id text;
        v_fanned integer;
    BEGIN
        INSERT INTO merchant_events (id, merchant_id, type, subject_id, data)
        VALUES ('evt_' || replace(gen_random_uuid()::text, '-', ''),
                p_merchant, p_type, p_subject, p_data)
        ON CONFLICT ON CONSTRAINT merchant_events_once DO NOTHING
        RETURNING id INTO v_id;
        IF v_id IS NULL THEN
            RETURN NULL;  -- recorded already: its deliveries were made then
        END IF;
        WITH delivery AS (
            INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id)
            SELECT v_id, e.id, e.merchant_id FROM webhook_endpoints e
            WHERE e.merchant_id = p_merchant AND e.enabled
              AND ('*' = ANY (e.enabled_events) OR p_type = ANY (e.enabled_events))
            RETURNING id
        )
        INSERT INTO outbox (topic, payload)
        SELECT 'endpoint.deliver', jsonb_build_object('version', 1, 'delivery_id', d.id)
        FROM delivery d;
        GET DIAGNOSTICS v_fanned = ROW_COUNT;
        IF v_fanned > 0 THEN
            PERFORM pg_notify('payflow_outbox', '');  -- delivered at commit only
        END IF;
        RETURN v_id;
    END
    $function$;
