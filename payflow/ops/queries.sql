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
