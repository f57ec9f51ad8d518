-- name: metrics_state
-- The database gauges of payflow.metrics in one round trip, computed at most once per
-- refresh period for the whole deployment (`state_gauges`, migration 0023).
-- $1: zombie bound for processing events (seconds); $2: for pending/enqueued events;
-- $3: stuck-claim bound for processed_events pending rows (seconds); $4: the period
-- (seconds): a stored snapshot younger than that (and not from the future) is served as it is.
-- Otherwise the one caller that wins the transaction-scoped advisory lock computes a
-- snapshot (whole-table counts by status: the expensive part) and stores it; a caller
-- that loses serves the stored one. `state` is NULL only before any snapshot exists
-- and while another caller computes the first one. `computed_at` is when it was taken.
WITH stored AS (
    SELECT state, computed_at FROM state_gauges WHERE id = 1
), due AS MATERIALIZED (
    SELECT pg_try_advisory_xact_lock(hashtextextended('payflow.metrics.state', 0)) AS won
    WHERE NOT EXISTS (
        SELECT 1 FROM stored
        WHERE computed_at > now() - make_interval(secs => $4::float8) AND computed_at <= now()
    )
), computed AS MATERIALIZED (
    SELECT now() AS computed_at, jsonb_build_object(
    'events', (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
       FROM (SELECT status, count(*) AS n FROM payment_events GROUP BY status) e),
    'payments', (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
       FROM (SELECT status, count(*) AS n FROM payments GROUP BY status) p),
    'dlq_unresolved', (SELECT count(*) FROM dead_letter_queue WHERE resolved_at IS NULL),
    'dlq_last_hour', (SELECT count(*) FROM dead_letter_queue
      WHERE created_at > now() - interval '1 hour'),
    'outbox_unpublished', (SELECT count(*) FROM outbox WHERE published_at IS NULL),
    'outbox_oldest_age_s', (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
       FROM outbox WHERE published_at IS NULL),
    'zombies_processing', (SELECT count(*) FROM payment_events
      WHERE status = 'processing' AND updated_at < now() - make_interval(secs => $1)),
    'zombies_waiting', (SELECT count(*) FROM payment_events
      WHERE (status = 'pending' AND updated_at < now() - make_interval(secs => $2))
         OR (status = 'enqueued' AND updated_at < now() - make_interval(secs => $2))),
    'stuck_claims', (SELECT count(*) FROM processed_events
      WHERE outcome = 'pending' AND created_at < now() - make_interval(secs => $3))
    ) AS state
    FROM due WHERE due.won
), saved AS (
    INSERT INTO state_gauges (id, computed_at, state)
    SELECT 1, computed_at, state FROM computed
    ON CONFLICT (id) DO UPDATE SET computed_at = excluded.computed_at, state = excluded.state
)
SELECT coalesce((SELECT state FROM computed), (SELECT state FROM stored)) AS state,
       coalesce((SELECT computed_at FROM computed), (SELECT computed_at FROM stored))
           AS computed_at;
