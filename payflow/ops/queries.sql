-- name: lock_fallback_entry
-- $1 Redis fallback entry id: serializes two drains moving the same entry
SELECT pg_advisory_xact_lock(hashtextextended('payflow.dlq.fallback:' || $1, 0));

-- name: stale_enqueued_events
-- $1 first wait in seconds (STALE_EVENT_TIMEOUT_S), $2 wait cap (SWEEP_MAX_BACKOFF_S),
-- $3 limit. Events handed to the broker but not finished within their wait, which
-- doubles with every re-announcement (retry_count) up to the cap. The first condition
-- is the sargable bound for payment_events_enqueued_idx.
SELECT event_id, retry_count, trace_id, created_at FROM payment_events
WHERE status = 'enqueued'
  AND updated_at < now() - make_interval(secs => least($1::float8, $2::float8))
  AND updated_at < now() - make_interval(secs => least($2::float8, $1::float8 * power(2, least(retry_count, 40))))
ORDER BY updated_at
LIMIT $3
FOR UPDATE SKIP LOCKED;

-- name: orphaned_pending_events
-- $1 first wait in seconds, $2 wait cap, $3 limit. Pending events past their wait with
-- no unpublished `ledger.event` row that would announce them (the row was published
-- but the event never moved, or it is gone): nothing would ever post them. An event
-- whose row is still waiting for the relay (or backing off) is not touched.
SELECT e.event_id, e.retry_count, e.trace_id, e.created_at FROM payment_events e
WHERE e.status = 'pending'
  AND e.created_at < now() - make_interval(secs => least($1::float8, $2::float8))
  AND e.updated_at < now() - make_interval(secs => least($2::float8, $1::float8 * power(2, least(e.retry_count, 40))))
  AND NOT EXISTS (
      SELECT 1 FROM outbox o
      WHERE o.published_at IS NULL AND o.topic = 'ledger.event'
        AND o.payload ->> 'event_id' = e.event_id
  )
ORDER BY e.created_at
LIMIT $3
FOR UPDATE OF e SKIP LOCKED;

-- name: stale_unfinished_events
-- $1 age in seconds: pending or processing events older than that (alert only). One arm
-- per status, so each is served by its partial index (payment_events_pending_idx,
-- payment_events_processing_idx) and the cost follows the unfinished rows, not the
-- ledger: `status IN (...)` proves neither index's predicate and scanned the table.
SELECT status, count(*) AS stale FROM payment_events
WHERE (status = 'pending' AND updated_at < now() - make_interval(secs => $1))
   OR (status = 'processing' AND updated_at < now() - make_interval(secs => $1))
GROUP BY status;

-- name: bump_retry_count
-- $1 event id, $2 last error. Counts one re-announcement and restarts its wait. Not a
-- status write: the state machine moves the status.
UPDATE payment_events SET retry_count = retry_count + 1, last_error = $2, updated_at = now()
WHERE event_id = $1
RETURNING retry_count;

-- name: overdue_pending_payments
-- $1 first wait in seconds (PAYMENT_SWEEP_AFTER_S), $2 wait cap, $3 limit. Payments
-- still pending past their wait (doubling per sweep) with no unpublished
-- `payment.created` row for them. Served by payments_pending_created_idx.
SELECT p.id, p.trace_id, p.created_at FROM payments p
WHERE p.status = 'pending'
  AND p.created_at < now() - make_interval(secs => least($1::float8, $2::float8))
  AND coalesce(p.payment_swept_at, p.created_at)
      < now() - make_interval(secs => least($2::float8, $1::float8 * power(2, least(p.payment_sweeps, 40))))
  AND NOT EXISTS (
      SELECT 1 FROM outbox o
      WHERE o.published_at IS NULL AND o.topic = 'payment.created'
        AND o.payload ->> 'payment_id' = p.id::text
  )
ORDER BY p.created_at
LIMIT $3
FOR UPDATE OF p SKIP LOCKED;

-- name: count_payment_sweep
-- $1 payment id: one more re-announcement of its processing, now. "Not final" rather than
-- status = 'pending' (the same rows under payments_status_valid): that literal would let the
-- planner walk the partial index payments_pending_created_idx and filter it by id instead
-- of using payments_pkey.
UPDATE payments SET payment_sweeps = payment_sweeps + 1, payment_swept_at = now()
WHERE id = $1 AND status NOT IN ('succeeded', 'failed')
RETURNING payment_sweeps;

-- name: overdue_webhooks
-- $1 first wait in seconds (WEBHOOK_SWEEP_AFTER_S), $2 wait cap, $3 limit. Final
-- payments with a webhook URL whose webhook is neither delivered nor dead-lettered and
-- has no live chain: the chain that owns it was expected back (webhook_next_attempt_at:
-- its lease's end, or its retry tier's end; never claimed: processed_at) more than the
-- first wait ago. A job still in a send or on its retry tiers is not touched, however old
-- its payment. Then the doubling wait per sweep, and no unpublished `webhook.deliver` row
-- for it. The processed_at bound (implied: the chain's times follow it) is the sargable one
-- for payments_webhook_sweep_idx.
SELECT p.id, p.trace_id, p.processed_at FROM payments p
WHERE p.webhook_delivered_at IS NULL AND p.webhook_dead_at IS NULL
  AND p.webhook_url IS NOT NULL AND p.status <> 'pending'
  AND p.processed_at < now() - make_interval(secs => least($1::float8, $2::float8))
  AND coalesce(p.webhook_next_attempt_at, p.processed_at)
      < now() - make_interval(secs => least($1::float8, $2::float8))
  AND coalesce(p.webhook_lease_until, '-infinity') < now()
  AND coalesce(p.webhook_swept_at, p.processed_at)
      < now() - make_interval(secs => least($2::float8, $1::float8 * power(2, least(p.webhook_sweeps, 40))))
  AND NOT EXISTS (
      SELECT 1 FROM outbox o
      WHERE o.published_at IS NULL AND o.topic = 'webhook.deliver'
        AND o.payload ->> 'payment_id' = p.id::text
  )
ORDER BY p.processed_at
LIMIT $3
FOR UPDATE OF p SKIP LOCKED;

-- name: count_webhook_sweep
-- $1 payment id: one more re-announcement of its webhook, now
UPDATE payments SET webhook_sweeps = webhook_sweeps + 1, webhook_swept_at = now()
WHERE id = $1 AND webhook_delivered_at IS NULL AND webhook_dead_at IS NULL
RETURNING webhook_sweeps;

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

-- name: try_job_claim_lock
-- $1 job name. Transaction-scoped lock around the "is it due?" check and the claim of a
-- run (a key apart from the job's own lock, which the job takes in its transactions).
SELECT pg_try_advisory_xact_lock(hashtextextended('payflow.jobs.claim.' || $1, 0));

-- name: claim_job_run
-- $1 job, $2 interval in seconds, $3 host, $4 pid, $5 force (run by hand). Records the
-- start of a run unless one started less than the interval ago (the last run decides when
-- the job is next due, across every replica). Returns nothing when it is not due.
INSERT INTO job_runs (job, host, pid)
SELECT $1, $3, $4
WHERE $5::boolean OR NOT EXISTS (
    SELECT 1 FROM job_runs
    WHERE job = $1 AND started_at > now() - make_interval(secs => $2::float8)
)
RETURNING id, started_at;

-- name: finish_job_run
-- $1 run id, $2 outcome (ok|alert|skipped|failed), $3 summary (cut to 2000 characters)
UPDATE job_runs SET finished_at = clock_timestamp(), outcome = $2, summary = left($3, 2000)
WHERE id = $1 AND finished_at IS NULL;

-- name: last_job_runs
-- $1 job names: the latest run of each (running or finished)
SELECT DISTINCT ON (job) job, started_at, finished_at, outcome, summary, host, pid
FROM job_runs WHERE job = ANY($1::text[])
ORDER BY job, started_at DESC;

-- name: last_finished_job_run
-- $1 job name: its latest run that finished and was not skipped, with its age in seconds
SELECT started_at, finished_at, outcome, summary,
       extract(epoch FROM now() - finished_at)::float8 AS age_s
FROM job_runs
WHERE job = $1 AND finished_at IS NOT NULL AND outcome <> 'skipped'
ORDER BY started_at DESC
LIMIT 1;

-- name: delete_job_runs_before
-- $1 retention in seconds, $2 max rows per call: the oldest runs past the retention
DELETE FROM job_runs
WHERE id IN (
    SELECT id FROM job_runs
    WHERE started_at < now() - make_interval(secs => $1::float8)
    ORDER BY started_at
    LIMIT $2
);

-- name: zombie_counts
-- $1 processing age s, $2 pending/enqueued age s, $3 payment pending age s, $4 webhook
-- age s. Work that should have finished long ago, by kind (served by the partial indexes
-- of payment_events per status, payments_pending_created_idx, payments_webhook_sweep_idx).
SELECT
    (SELECT count(*) FROM payment_events
      WHERE status = 'processing' AND updated_at < now() - make_interval(secs => $1::float8)
    ) AS events_processing,
    (SELECT count(*) FROM payment_events
      -- one arm per status, so each partial index proves its predicate (not `IN (...)`)
      WHERE (status = 'pending' AND created_at < now() - make_interval(secs => $2::float8))
         OR (status = 'enqueued' AND created_at < now() - make_interval(secs => $2::float8))
    ) AS events_waiting,
    (SELECT count(*) FROM payments
      WHERE status = 'pending' AND created_at < now() - make_interval(secs => $3::float8)
    ) AS payments_pending,
    (SELECT count(*) FROM payments
      WHERE webhook_delivered_at IS NULL AND webhook_dead_at IS NULL
        AND webhook_url IS NOT NULL AND status <> 'pending'
        AND processed_at < now() - make_interval(secs => $4::float8)
    ) AS webhooks_undelivered;

-- name: dead_letters_created_since
-- $1 window in seconds: dead letters created within it (dead_letter_queue_created_idx)
SELECT count(*) FROM dead_letter_queue WHERE created_at > now() - make_interval(secs => $1::float8);

-- name: stuck_claims
-- $1 age in seconds: posting claims still `pending` older than that. A claim and its
-- outcome commit together, so any such row breaks an invariant (processed_events_pending_idx).
SELECT count(*) AS stuck, min(created_at) AS oldest,
       (array_agg(idempotency_key ORDER BY created_at))[1:5] AS examples
FROM processed_events
WHERE outcome = 'pending' AND created_at < now() - make_interval(secs => $1::float8);

-- name: dead_letters_unresolved
-- the number of unresolved dead letters (dead_letter_queue_unresolved_idx)
SELECT count(*) FROM dead_letter_queue WHERE resolved_at IS NULL;

-- name: outbox_lag
-- unpublished outbox rows and the age in seconds of the oldest (NULL when none)
SELECT count(*) AS unpublished,
       extract(epoch FROM now() - min(created_at))::float8 AS oldest_age_s
FROM outbox WHERE published_at IS NULL;

-- name: alerts_table
-- the `alerts` table when it exists (NULL before its migration)
SELECT to_regclass('alerts') IS NOT NULL;

-- name: open_alerts
-- $1 limit: unresolved alerts, critical first, newest first
SELECT key, severity, message, first_seen, last_seen, count FROM alerts
WHERE resolved_at IS NULL
ORDER BY (severity = 'critical') DESC, last_seen DESC
LIMIT $1;

-- name: open_alerts_with_prefix
-- $1 key prefixes: unresolved alerts whose key starts with one of them (the chain's
-- node and scanner-lag alerts, which `payflow status` counts as problems)
SELECT key, message FROM alerts
WHERE resolved_at IS NULL
  AND EXISTS (SELECT 1 FROM unnest($1::text[]) AS p(prefix) WHERE starts_with(key, p.prefix))
ORDER BY key;
