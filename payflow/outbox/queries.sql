-- name: insert_outbox
-- $1 topic (routing key), $2 payload (jsonb), $3 trace id
-- The NOTIFY is delivered only when the surrounding transaction commits.
WITH row AS (
    INSERT INTO outbox (topic, payload, trace_id) VALUES ($1, $2, $3) RETURNING id
), wake AS (
    SELECT pg_notify('payflow_outbox', '')
)
SELECT row.id FROM row, wake;

-- name: wake_relay
-- An after-commit wake-up (`payflow.outbox.waker`), its own one-statement transaction.
SELECT pg_notify('payflow_outbox', '');

-- name: claim_batch
-- $1 batch size. Locks due unpublished rows, due first (a new row is due at once, a row
-- whose publish the broker refused waits out its back-off); rows held by another relay
-- are skipped. Served by outbox_due_idx (next_attempt_at, id) WHERE published_at IS NULL.
SELECT id, topic, payload, trace_id, publish_attempts, created_at
FROM outbox
WHERE published_at IS NULL AND next_attempt_at <= now()
ORDER BY next_attempt_at, id
LIMIT $1
FOR UPDATE SKIP LOCKED;

-- name: mark_published
-- $1 outbox ids whose publish the broker confirmed
UPDATE outbox SET published_at = clock_timestamp(), publish_attempts = publish_attempts + 1
WHERE id = ANY($1::bigint[]);

-- name: release_held_job
-- $1 outbox id. A job held back for its worker (a credit posted right after its commit)
-- becomes due now, because that worker will not settle it; the relay publishes it next.
-- "Unpublished" is num_nulls(published_at) = 1, not published_at IS NULL: that would let
-- the planner find the row by walking the partial index outbox_due_idx instead of the key.
UPDATE outbox SET next_attempt_at = now()
WHERE id = $1 AND num_nulls(published_at) = 1 AND next_attempt_at > now();

-- name: count_failed_publish
-- $1 outbox ids whose publish failed on the way (connection, channel), $2 the error text.
-- They stay due: the relay as a whole backs off and retries them on the next pass.
UPDATE outbox SET publish_attempts = publish_attempts + 1, last_error = $2
WHERE id = ANY($1::bigint[]);

-- name: defer_refused_publish
-- $1 outbox ids the broker refused (returned as unroutable, or nacked), $2 their error
-- texts (same order), $3 first back-off in seconds, $4 back-off cap in seconds.
-- Each waits min($3 * 2^(attempts before this one), $4) before it is due again.
UPDATE outbox AS o
SET publish_attempts = o.publish_attempts + 1,
    last_error = f.error,
    next_attempt_at = clock_timestamp()
        + make_interval(secs => least($4::float8, $3::float8 * power(2, least(o.publish_attempts, 40))))
FROM unnest($1::bigint[], $2::text[]) AS f(id, error)
WHERE o.id = f.id
RETURNING o.id, o.topic, o.trace_id, o.publish_attempts, o.next_attempt_at;

-- name: delete_published_before
-- $1 retention in seconds, $2 max rows per call. Never touches unpublished rows.
DELETE FROM outbox
WHERE id IN (
    SELECT id FROM outbox
    WHERE published_at IS NOT NULL AND published_at < now() - make_interval(secs => $1)
    ORDER BY published_at
    LIMIT $2
);

-- name: stale_unpublished
-- $1 age in seconds: how many unpublished rows are older, and the oldest of them
SELECT count(*) AS stale, min(created_at) AS oldest, min(id) AS oldest_id
FROM outbox
WHERE published_at IS NULL AND created_at < now() - make_interval(secs => $1);
