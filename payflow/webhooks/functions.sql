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
-- Records one event of merchant p_merchant (p_type one of the event types, p_subject the
-- cause's id, p_data the event's `data` object) under a new `evt_` id and returns it;
-- NULL when (p_type, p_subject) was recorded already (merchant_events_once). The one way
-- into merchant_events (SECURITY DEFINER, migration 0037): the service role may call it,
-- never insert directly; payflow.webhooks.record_event calls it. Since 0040 it is
-- merchant_event_record_leasing with no lease: every delivery's job is due at once.
CREATE OR REPLACE FUNCTION public.merchant_event_record(p_merchant uuid, p_type text, p_subject text, p_data jsonb)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        RETURN (SELECT r.o_event_id
                FROM merchant_event_record_leasing(p_merchant, p_type, p_subject, p_data,
                                                   NULL, NULL) AS r);
    END
    $function$;

-- name: merchant_event_record_leasing
-- merchant_event_record, and the fan-out's sends leased to the caller (migration 0040):
-- with p_lease_token (and p_lease_s > 0) every delivery it makes (one per enabled endpoint
-- of the merchant that wants p_type) is created under that lease until now + p_lease_s,
-- and its `endpoint.deliver` job is held back until the lease ends: the job is the
-- guarantee of the caller's own first send (payflow.webhooks.endpoints.direct), published
-- only if that send does not settle it first. With no token the jobs are due at once and
-- the relay is woken at commit. Returns the event id (NULL: recorded already, nothing fanned
-- out), and the deliveries leased to the caller with their held jobs' ids, in the same
-- order (NULL: none, or no lease was asked for).
CREATE OR REPLACE FUNCTION public.merchant_event_record_leasing(p_merchant uuid, p_type text, p_subject text, p_data jsonb, p_lease_token text, p_lease_s double precision, OUT o_event_id text, OUT o_deliveries bigint[], OUT o_jobs bigint[])
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;
