-- The webhook attempt log's SQL function as it is at the head revision
-- (payflow/db/functions.py), rewritten by `uv run python -m payflow.db.schema`.

-- name: cleanup_webhook_attempt_log
-- Deletes attempt rows older than min_age_days (clamped up to 1), oldest first, at most
-- batch_size (clamped to [1, 10000]) rows locked with SKIP LOCKED; returns how many
-- (SECURITY DEFINER, migration 0019; the scheduler job cleanup_webhook_attempt_log).
CREATE OR REPLACE FUNCTION public.cleanup_webhook_attempt_log(min_age_days integer, batch_size integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
    $function$;
