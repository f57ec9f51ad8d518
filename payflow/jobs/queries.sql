-- The job machinery's SQL: the per-job lock every replica's run takes.

-- name: try_job_lock
-- $1 job name. Transaction-scoped: released at commit, safe behind PgBouncer.
SELECT pg_try_advisory_xact_lock(hashtextextended('payflow.scheduler.' || $1, 0));
