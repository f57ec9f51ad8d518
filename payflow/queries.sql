-- name: metrics_state
-- The database gauges of payflow.metrics in one round trip (read-only snapshot).
-- $1: zombie bound for processing events (seconds); $2: for pending/enqueued events;
-- $3: stuck-claim bound for processed_events pending rows (seconds).
SELECT
    (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
       FROM (SELECT status, count(*) AS n FROM payment_events GROUP BY status) e) AS events,
    (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
       FROM (SELECT status, count(*) AS n FROM payments GROUP BY status) p) AS payments,
    (SELECT count(*) FROM dead_letter_queue WHERE resolved_at IS NULL) AS dlq_unresolved,
    (SELECT count(*) FROM dead_letter_queue
      WHERE created_at > now() - interval '1 hour') AS dlq_last_hour,
    (SELECT count(*) FROM outbox WHERE published_at IS NULL) AS outbox_unpublished,
    (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
       FROM outbox WHERE published_at IS NULL) AS outbox_oldest_age_s,
    (SELECT count(*) FROM payment_events
      WHERE status = 'processing' AND updated_at < now() - make_interval(secs => $1))
        AS zombies_processing,
    (SELECT count(*) FROM payment_events
      WHERE status IN ('pending', 'enqueued') AND updated_at < now() - make_interval(secs => $2))
        AS zombies_waiting,
    (SELECT count(*) FROM processed_events
      WHERE outcome = 'pending' AND created_at < now() - make_interval(secs => $3))
        AS stuck_claims;
