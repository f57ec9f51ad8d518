-- name: mark_webhook_dead
-- $1 payment id. The webhook job was dead-lettered (with its DLQ row, same transaction):
-- the webhook sweep leaves it alone. A delivered webhook is never marked dead, and one
-- already dead is not marked again: a row comes back only for the transition, so the
-- caller writes the job's one DLQ row only then.
UPDATE payments SET webhook_dead_at = now()
WHERE id = $1 AND webhook_delivered_at IS NULL AND webhook_dead_at IS NULL
RETURNING webhook_dead_at;

-- name: clear_webhook_dead
-- $1 payment id. A manual DLQ replay hands the webhook back to the pipeline: no chain owns
-- it (the replay's message takes it), and the sweep watches it again, its wait restarting
-- from now.
UPDATE payments
SET webhook_dead_at = NULL, webhook_sweeps = 0, webhook_swept_at = now(),
    webhook_chain_message = NULL, webhook_chain_attempt = NULL,
    webhook_next_attempt_at = now()
WHERE id = $1;

-- name: payment_for_webhook_replay
-- $1 payment id
SELECT id, status, webhook_delivered_at, webhook_url, trace_id FROM payments
WHERE id = $1 FOR UPDATE;
