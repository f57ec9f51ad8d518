-- name: insert_dead_letter
-- $1 source (payment_event|payment|webhook), $2 subject id, $3 payload, $4 error, $5 attempt
INSERT INTO dead_letter_queue (source, subject_id, payload, error, attempt)
VALUES ($1, $2, $3, $4, $5)
RETURNING id;

-- name: dead_letter_of_fallback_entry
-- $1 source, $2 subject id, $3 Redis fallback entry id: the row the drain already made of
-- that entry (served by dead_letter_queue_subject_idx)
SELECT id FROM dead_letter_queue
WHERE source = $1 AND subject_id = $2 AND payload -> '_dlq_fallback' ->> 'entry_id' = $3
LIMIT 1;

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
-- $1 id, $2 operator, $3 resolution text. "Unresolved" is num_nulls(resolved_at) = 1, not
-- resolved_at IS NULL: that would let the planner find the row by walking the partial
-- index dead_letter_queue_unresolved_idx (every unresolved dead letter) instead of the key.
UPDATE dead_letter_queue SET resolved_at = now(), resolved_by = $2, resolution = $3
WHERE id = $1 AND num_nulls(resolved_at) = 1
RETURNING resolved_at;

-- name: lock_fallback_entry
-- $1 Redis fallback entry id: serializes two drains moving the same entry
SELECT pg_advisory_xact_lock(hashtextextended('payflow.dlq.fallback:' || $1, 0));
