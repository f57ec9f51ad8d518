-- name: insert_outbox
-- $1 topic (routing key), $2 payload (jsonb), $3 trace id
-- The NOTIFY is delivered only when the surrounding transaction commits.
WITH row AS (
    INSERT INTO outbox (topic, payload, trace_id) VALUES ($1, $2, $3) RETURNING id
), wake AS (
    SELECT pg_notify('payflow_outbox', '')
)
SELECT row.id FROM row, wake;

-- name: claim_batch
-- $1 batch size. Locks unpublished rows oldest first; rows held by another relay are skipped.
SELECT id, topic, payload, trace_id, publish_attempts, created_at
FROM outbox
WHERE published_at IS NULL
ORDER BY id
LIMIT $1
FOR UPDATE SKIP LOCKED;

-- name: mark_published
-- $1 outbox ids whose publish the broker confirmed
UPDATE outbox SET published_at = clock_timestamp(), publish_attempts = publish_attempts + 1
WHERE id = ANY($1::bigint[]);

-- name: count_failed_publish
-- $1 outbox ids whose publish failed; they stay unpublished for the next pass
UPDATE outbox SET publish_attempts = publish_attempts + 1
WHERE id = ANY($1::bigint[]);

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
