-- name: insert_dead_letter
-- $1 source (payment_event|payment|webhook), $2 subject id, $3 payload, $4 error, $5 attempt
INSERT INTO dead_letter_queue (source, subject_id, payload, error, attempt)
VALUES ($1, $2, $3, $4, $5)
RETURNING id;

-- name: list_dead_letters
-- $1 include resolved?, $2 limit
SELECT id, source, subject_id, payload, error, attempt, created_at,
       resolved_at, resolved_by, resolution
FROM dead_letter_queue
WHERE $1::boolean OR resolved_at IS NULL
ORDER BY id DESC
LIMIT $2;

-- name: get_dead_letter
-- $1 id
SELECT id, source, subject_id, payload, error, attempt, created_at,
       resolved_at, resolved_by, resolution
FROM dead_letter_queue WHERE id = $1;

-- name: lock_dead_letter
-- $1 id: lock the row so two operators cannot replay it at once
SELECT id, source, subject_id, payload, resolved_at
FROM dead_letter_queue WHERE id = $1 FOR UPDATE;

-- name: resolve_dead_letter
-- $1 id, $2 operator, $3 resolution text
UPDATE dead_letter_queue SET resolved_at = now(), resolved_by = $2, resolution = $3
WHERE id = $1 AND resolved_at IS NULL
RETURNING resolved_at;

-- name: stale_enqueued_events
-- $1 age in seconds, $2 limit: events handed to the broker but not finished in time
SELECT event_id, retry_count, trace_id FROM payment_events
WHERE status = 'enqueued' AND updated_at < now() - make_interval(secs => $1)
ORDER BY updated_at
LIMIT $2
FOR UPDATE SKIP LOCKED;

-- name: stale_unfinished_events
-- $1 age in seconds: pending or processing events older than that (alert only)
SELECT status, count(*) AS stale FROM payment_events
WHERE status IN ('pending', 'processing') AND updated_at < now() - make_interval(secs => $1)
GROUP BY status;

-- name: bump_retry_count
-- $1 event id, $2 last error. Not a status write: the state machine moves the status.
UPDATE payment_events SET retry_count = retry_count + 1, last_error = $2
WHERE event_id = $1
RETURNING retry_count;

-- name: has_posting_claim
-- $1 idempotency key of the event's posting
SELECT outcome FROM processed_events WHERE idempotency_key = $1;

-- name: try_job_lock
-- $1 job name. Transaction-scoped: released at commit, safe behind PgBouncer.
SELECT pg_try_advisory_xact_lock(hashtextextended('payflow.scheduler.' || $1, 0));

-- name: event_for_replay
-- $1 event id
SELECT event_id, status, trace_id FROM payment_events WHERE event_id = $1 FOR UPDATE;

-- name: payment_for_replay
-- $1 payment id
SELECT id, status, webhook_delivered_at, webhook_url, trace_id FROM payments
WHERE id = $1 FOR UPDATE;

-- name: delete_idempotency_before
-- $1 retention in seconds, $2 max rows per call: the oldest api_idempotency records past
-- the retention (index api_idempotency_created_idx). After that the payment or payment
-- event the request made answers a retry (see payflow.ops.retention).
DELETE FROM api_idempotency
WHERE (merchant_id, scope, key) IN (
    SELECT merchant_id, scope, key FROM api_idempotency
    WHERE created_at < now() - make_interval(secs => $1)
    ORDER BY created_at
    LIMIT $2
);
