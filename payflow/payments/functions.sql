-- The payments package's SQL functions as they are at the head revision
-- (payflow/db/functions.py). Migrations are their history; each statement below is
-- PostgreSQL's own definition, rewritten by `uv run python -m payflow.db.schema`.

-- name: payment_finalize
-- A payment's finalize (migration 0022; since 0024 it finds the payment by key, "not final"
-- instead of status = 'pending'): the status, the answer, the credit event and, when $20
-- (the posting key) is given, its posting through ledger_post_success, in one commit.
-- $1-$19 as the old `finalize_payment` statement, $20 the posting key, $21-$23 the success
-- path's source statuses, credit types and the types a frozen account refuses.
-- Since 0037 the same statement records the merchant's payment.succeeded or payment.failed
-- event (subject: the payment id); since 0040 through merchant_event_record_leasing, with
-- $24 the lease token of the finalizing worker's own first sends of the event to the
-- merchant's endpoints and $25 that lease's seconds (null: the deliveries' jobs are due at
-- once): o_held_deliveries are the deliveries leased to it, o_held_delivery_jobs their held
-- `endpoint.deliver` jobs, in the same order.
CREATE OR REPLACE FUNCTION public.payment_finalize(uuid, text, uuid, text, text, numeric, text, text, text, jsonb, text, jsonb, double precision, text, text, text, integer, text, double precision, text, text[], text[], text[], text, double precision, OUT o_finalized boolean, OUT o_credited boolean, OUT o_credit_job bigint, OUT o_held_webhook_job bigint, OUT o_balance_after numeric, OUT o_held_deliveries bigint[], OUT o_held_delivery_jobs bigint[])
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'public', 'pg_catalog', 'pg_temp'
AS $function$
    BEGIN
        WITH bound AS MATERIALIZED (
            SELECT CASE WHEN $17::integer IS NOT NULL
                   THEN pg_catalog.set_config('lock_timeout', $17::integer::text, true) END
        ), locked AS MATERIALIZED (
            SELECT p.id FROM payments p, bound
            WHERE p.id = $1 AND p.status NOT IN ('succeeded', 'failed')
            FOR UPDATE OF p
        ), account AS MATERIALIZED (
            SELECT a.id FROM accounts a
            WHERE $5::text IS NOT NULL AND a.merchant_id = $3 AND a.asset = $4 AND a.settlement
        ), answered AS MATERIALIZED (
            UPDATE charge_attempts
            SET state = $14, reason = $15, gateway_reference = $16,
                answered_at = clock_timestamp()
            WHERE $14::text IS NOT NULL AND payment_id = (SELECT id FROM locked)
              AND state IN ('claimed', 'needs_review')
              AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM account))
            RETURNING attempt_id
        ), lease AS MATERIALIZED (
            SELECT CASE WHEN $12::jsonb IS NOT NULL AND $18::text IS NOT NULL
                   THEN clock_timestamp() + make_interval(secs => $19::float8) END AS until
        ), fin AS (
            UPDATE payments SET status = $2, processed_at = clock_timestamp(),
                webhook_lease_token = CASE WHEN lease.until IS NOT NULL THEN $18
                                           ELSE webhook_lease_token END,
                webhook_lease_until = coalesce(lease.until, webhook_lease_until),
                webhook_next_attempt_at = coalesce(lease.until, webhook_next_attempt_at)
            FROM lease
            WHERE id = (SELECT id FROM locked)
              AND ($14::text IS NULL OR EXISTS (SELECT 1 FROM answered))
            RETURNING id, lease.until AS lease_until
        ), credit AS (
            -- No ON CONFLICT: an existing row with this derived id was not written for
            -- this payment, so the unique violation on payment_events_pkey stops the
            -- statement (the caller raises IdCollision).
            INSERT INTO payment_events (event_id, account_id, amount, event_type, trace_id)
            SELECT $5, account.id, $6, $7, $8 FROM account, fin
            RETURNING event_id
        ), credit_job AS (
            -- Posted here ($20): the job is written below only if the posting did not.
            INSERT INTO outbox (topic, payload, trace_id, next_attempt_at)
            SELECT $9, $10, $8, now() + make_interval(secs => $13::float8) FROM account, fin
            WHERE $20::text IS NULL
            RETURNING id
        ), webhook_job AS (
            INSERT INTO outbox (topic, payload, trace_id, next_attempt_at)
            SELECT $11, $12, $8, coalesce(fin.lease_until, now()) FROM fin
            WHERE $12::jsonb IS NOT NULL
            RETURNING id
        ), wake AS (
            -- The relay is woken only for a job due now: a held one is the worker's.
            SELECT pg_notify('payflow_outbox', '') FROM fin
            WHERE ($20::text IS NULL AND $13::float8 <= 0 AND EXISTS (SELECT 1 FROM account))
               OR ($12::jsonb IS NOT NULL AND fin.lease_until IS NULL)
        )
        SELECT EXISTS (SELECT 1 FROM fin),
               EXISTS (SELECT 1 FROM account),
               (SELECT id FROM credit_job),
               (SELECT webhook_job.id FROM webhook_job, fin WHERE fin.lease_until IS NOT NULL)
        INTO o_finalized, o_credited, o_credit_job, o_held_webhook_job
        FROM (SELECT count(*) FROM wake) AS woken;

        IF o_finalized THEN
            -- The merchant's event of this outcome (subject: the payment), amounts as
            -- text at the currency's scale, never fewer digits than stored.
            SELECT r.o_deliveries, r.o_jobs INTO o_held_deliveries, o_held_delivery_jobs
            FROM payments p LEFT JOIN assets s ON s.code = p.currency,
            LATERAL merchant_event_record_leasing(
                p.merchant_id, 'payment.' || p.status, p.id::text,
                jsonb_build_object(
                    'payment_id', p.id::text,
                    'status', p.status,
                    'amount', round(trim_scale(p.amount),
                                    greatest(coalesce(s.scale, 0),
                                             scale(trim_scale(p.amount))))::text,
                    'currency', p.currency,
                    'description', p.description,
                    'metadata', p.metadata,
                    'created_at', to_char(p.created_at AT TIME ZONE 'UTC',
                                          'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                    'processed_at', to_char(p.processed_at AT TIME ZONE 'UTC',
                                            'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')),
                $24, $25) AS r
            WHERE p.id = $1;
        END IF;

        IF $20 IS NULL OR NOT o_finalized OR NOT o_credited OR $5 IS NULL THEN
            RETURN;
        END IF;
        -- The ledger's one success path; it raises (and so undoes this whole statement)
        -- when it cannot decide, and answers NULL when the key is claimed already.
        o_balance_after := ledger_post_success($20, $5, $21, $22, $23, $17);
        IF o_balance_after IS NULL THEN
            INSERT INTO outbox (topic, payload, trace_id) VALUES ($9, $10, $8)
            RETURNING id INTO o_credit_job;
            PERFORM pg_notify('payflow_outbox', '');
        END IF;
    END
    $function$;
