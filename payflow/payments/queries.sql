-- name: create_payment
-- $1 merchant id, $2 amount, $3 currency, $4 description, $5 metadata, $6 idempotency key,
-- $7 webhook url, $8 trace id, $9 request hash, $10 advisory lock key of the idempotency key,
-- $11 the outbox topic of a new payment (payment.created), $12 lock_timeout (ms) for this
-- statement's implicit transaction (set before any lock), $13 whether the commit sends the
-- relay's NOTIFY (false: the caller wakes the relay after commit, `outbox.waker`).
-- ONE statement, sent outside a transaction (it is its own). An unconfigured asset writes
-- nothing and takes no lock. Otherwise take the key's transaction lock, read any stored
-- record and any payment already made under the key (the domain row, which outlives the
-- record's retention): those answer a retry whatever the currency's limits are now. Only
-- when the lock was free, neither exists and the amount is within `max_payment` (`within`;
-- the caller raises the 422 otherwise), insert the payment, its completed idempotency
-- record and its outbox
-- job (with the relay's NOTIFY, delivered at commit, unless $13 is false). `prior_*`
-- describe the existing payment, `prior_response` is the answer rebuilt from it (same
-- shape as `response`, with its current status). Visibility follows the statement
-- snapshot; a record committed by a concurrent request after it was taken fails a unique
-- key, and the caller retries.
WITH bound AS MATERIALIZED (
    SELECT pg_catalog.set_config('lock_timeout', $12::integer::text, true)
), asset AS MATERIALIZED (
    SELECT a.code, a.scale, a.max_payment, a.max_withdrawal, a.max_deposit,
           $2::numeric <= a.max_payment AS within
    FROM assets a, bound
    WHERE a.code = $3
), lock AS MATERIALIZED (
    SELECT pg_try_advisory_xact_lock($10) AS locked FROM asset
), existing AS MATERIALIZED (
    SELECT i.request_hash, i.state, i.response_status, i.response_body
    FROM api_idempotency i, lock
    WHERE i.merchant_id = $1 AND i.scope = 'payments.create' AND i.key = $6
), prior AS MATERIALIZED (
    SELECT q.id, q.amount, q.currency, q.description, q.metadata, q.webhook_url,
           json_build_object(
               'payment_id', q.id::text,
               'status', q.status,
               'created_at',
               to_char(q.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
           ) AS response
    FROM payments q, lock
    WHERE q.merchant_id = $1 AND q.idempotency_key = $6
), p AS (
    INSERT INTO payments
        (merchant_id, amount, currency, description, metadata, idempotency_key, webhook_url,
         trace_id)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8
    FROM lock, asset
    WHERE lock.locked AND asset.within AND NOT EXISTS (SELECT 1 FROM existing)
      AND NOT EXISTS (SELECT 1 FROM prior)
    RETURNING id, status, created_at
), body AS (
    SELECT p.id, json_build_object(
        'payment_id', p.id::text,
        'status', p.status,
        'created_at', to_char(p.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    ) AS response
    FROM p
), stored AS (
    INSERT INTO api_idempotency
        (merchant_id, scope, key, request_hash, state, response_status, response_body)
    SELECT $1, 'payments.create', $6, $9, 'completed', 202, body.response FROM body
), job AS (
    INSERT INTO outbox (topic, payload, trace_id)
    SELECT $11, jsonb_build_object('version', 1, 'payment_id', p.id::text), $8 FROM p
    RETURNING id
), wake AS (
    SELECT pg_notify('payflow_outbox', '') FROM job WHERE $13::boolean
)
SELECT asset.code, asset.scale, asset.max_payment, asset.max_withdrawal, asset.max_deposit,
       asset.within,
       lock.locked, e.request_hash, e.state, e.response_status, e.response_body,
       body.id, body.response,
       prior.id AS prior_id, prior.amount AS prior_amount, prior.currency AS prior_currency,
       prior.description AS prior_description, prior.metadata AS prior_metadata,
       prior.webhook_url AS prior_webhook_url, prior.response AS prior_response
FROM (SELECT 1) AS one
LEFT JOIN asset ON true
LEFT JOIN lock ON true
LEFT JOIN existing e ON true
LEFT JOIN prior ON true
LEFT JOIN body ON true
-- A cross join, never a LEFT JOIN: the planner removes a left join to a one-row subquery
-- whose columns are unused, and `wake` (a plain SELECT) would then never run.
CROSS JOIN (SELECT count(*) AS woken FROM wake) AS w;

-- name: get_payment
-- $1 payment id, $2 merchant id
SELECT id, amount, currency, description, metadata, status, idempotency_key, webhook_url,
       webhook_delivered_at, webhook_attempts, created_at, processed_at
FROM payments WHERE id = $1 AND merchant_id = $2;

-- name: list_payments
-- $1 merchant id, $2 status or null, $3 created_from or null, $4 created_to or null,
-- $5 cursor created_at or null, $6 cursor id, $7 page size (+1 to detect a next page)
SELECT id, amount, currency, description, metadata, status, idempotency_key, webhook_url,
       webhook_delivered_at, webhook_attempts, created_at, processed_at
FROM payments
WHERE merchant_id = $1
  AND ($2::text IS NULL OR status = $2)
  AND ($3::timestamptz IS NULL OR created_at >= $3)
  AND ($4::timestamptz IS NULL OR created_at < $4)
  AND ($5::timestamptz IS NULL OR (created_at, id) < ($5, $6::uuid))
ORDER BY created_at DESC, id DESC
LIMIT $7;

-- name: payment_for_processing
-- $1 payment id: the payment with its merchant's webhook secret and its currency's scale
SELECT p.id, p.merchant_id, p.amount, p.currency, p.status, p.webhook_url,
       p.webhook_delivered_at, p.webhook_attempts, p.trace_id, p.processed_at, p.created_at,
       m.webhook_secret, a.scale
FROM payments p
JOIN merchants m ON m.id = p.merchant_id
JOIN assets a ON a.code = p.currency
WHERE p.id = $1;

-- name: finalize_payment
-- $1 payment id, $2 terminal status, $3 merchant id, $4 currency, $5 credit event id (null:
-- no credit), $6 credit amount, $7 credit event type, $8 trace id, $9 credit topic,
-- $10 credit payload, $11 webhook topic, $12 webhook payload (null: no webhook URL),
-- $13 seconds the ledger.event job is held back from the relay (0: due at once),
-- $14 the gateway's answer to record first (approved|declined; null: the caller recorded
-- it already), $15 its reason, $16 its reference, $17 lock_timeout (ms) to set for an
-- autocommitted statement before any lock (null: the caller's transaction set it),
-- $18 the webhook lease token of the finalizing worker's own first send (null: none; see
-- payflow.webhooks.direct), $19 that lease's seconds, $20 the credit's posting key (null:
-- the credit is not posted here), $21-$23 the ledger success path's statuses, credit types
-- and active-only types (payflow.ledger.posting.success_path_args), $24 the lease token
-- of the finalizing worker's own first sends of the payment's event to the merchant's
-- endpoints (null: none; see payflow.webhooks.endpoints.direct), $25 that lease's seconds.
-- One statement, so one atomic unit (the function `payment_finalize`, migration 0022, which
-- holds the SQL): compare-and-set the payment pending -> $2 and, only when it moved, write
-- the webhook job and (when the merchant's settlement account is visible to this
-- statement) the pending credit event with its ledger.event job, plus the relay's NOTIFY
-- (delivered at commit). `credited` false on a success means the account does not exist
-- yet: the caller opens it and writes the credit in the same transaction. `credit_job` is
-- the ledger.event row's id. A held-back job is the credit's guarantee while the worker
-- posts it itself right after the commit (`payflow.ledger.posting.post_held_credit`),
-- which deletes the job; if that worker dies first, the relay publishes the job when the
-- hold ends.
-- With $14 the statement is the whole answer step, sent outside a transaction: under the
-- payment's row lock (taken first: lock order payment, then attempts) it records $14 on
-- the open attempt and finalizes; it writes nothing (`finalized` false) unless the
-- payment is pending, an attempt is open, and a success's account exists.
-- With $20 as well the same commit posts the credit through the ledger's one success path
-- (`ledger_post_success`): no ledger.event job is written then (`balance_after` is the
-- posted balance); when that path answers NULL the job is written due now; when it
-- raises, nothing at all is written and the caller takes the transactional finalize.
-- With $18 (and a webhook URL) the same commit takes the webhook's lease for the worker's
-- own send and holds the `webhook.deliver` job back until the lease ends: the job is the
-- send's guarantee (`webhook_job` is its id), published only if the worker does not
-- settle it first.
-- With $24 the deliveries of the payment's event are made under that lease, their
-- `endpoint.deliver` jobs held back until it ends (`held_deliveries`, `held_delivery_jobs`,
-- in the same order; null: none), for the worker's own first sends.
SELECT o_finalized AS finalized, o_credited AS credited, o_credit_job AS credit_job,
       o_held_webhook_job AS held_webhook_job, o_balance_after AS balance_after,
       o_held_deliveries AS held_deliveries, o_held_delivery_jobs AS held_delivery_jobs
FROM payment_finalize($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                      $17, $18, $19, $20, $21, $22, $23, $24, $25);

-- name: finalize_payments_together
-- Several answered finalizes in ONE statement, so one commit: each row of the arrays is
-- one `finalize_payment` call ($1-$20 as its $1-$20, one element per payment; the two
-- job payloads as jsonb text), $21-$23 its shared $21-$23, $24-$25 arrays of its $24-$25
-- (the endpoint sends' lease). Called in the arrays' order
-- (a nested loop over the ordinality), one answer row each in that order. A merchant's
-- settlement account is then locked by the first posting and held to the one commit,
-- instead of once per payment. Any error undoes every payment's writes.
SELECT f.o_finalized AS finalized, f.o_credited AS credited, f.o_credit_job AS credit_job,
       f.o_held_webhook_job AS held_webhook_job, f.o_balance_after AS balance_after,
       f.o_held_deliveries AS held_deliveries, f.o_held_delivery_jobs AS held_delivery_jobs
FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::numeric[],
            $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[],
            $13::float8[], $14::text[], $15::text[], $16::text[], $17::integer[],
            $18::text[], $19::float8[], $20::text[], $24::text[], $25::float8[])
     WITH ORDINALITY
     AS a(payment, status, merchant, currency, event_id, amount, event_type, trace_id,
          credit_topic, credit_job, webhook_topic, webhook_job, hold_s, answer, reason,
          reference, lock_ms, lease_token, lease_s, posting_key, endpoint_lease_token,
          endpoint_lease_s, n)
CROSS JOIN LATERAL payment_finalize(
    a.payment, a.status, a.merchant, a.currency, a.event_id, a.amount, a.event_type,
    a.trace_id, a.credit_topic, a.credit_job::jsonb, a.webhook_topic, a.webhook_job::jsonb,
    a.hold_s, a.answer, a.reason, a.reference, a.lock_ms, a.lease_token, a.lease_s,
    a.posting_key, $21::text[], $22::text[], $23::text[], a.endpoint_lease_token,
    a.endpoint_lease_s) AS f
ORDER BY a.n;

-- ---- charge attempts: claimed before the gateway is called (payflow.payments.charges)

-- name: lock_payment_for_charge
-- $1 payment id. The payment row lock serialises every claim, answer and dead-lettering
-- of one payment's charge (lock order: payment, then its attempts).
SELECT status FROM payments WHERE id = $1 FOR UPDATE;

-- name: latest_charge_attempt
-- $1 payment id: the payment's newest attempt (the only one that can be open or answered)
SELECT attempt_id, attempt, state, claimed_by, reason, gateway_reference,
       lease_until <= clock_timestamp() AS expired
FROM charge_attempts
WHERE payment_id = $1
ORDER BY attempt DESC
LIMIT 1;

-- name: supersede_charge_attempt
-- $1 attempt id. An unanswered attempt whose lease expired (or that waits for review)
-- gives way to the next claim. "Not answered, not superseded" rather than the open
-- states by name: those literals would let the planner find the attempt by walking the
-- partial index charge_attempts_one_open (every open attempt) instead of its key; the
-- same rows under the CHECK on state.
UPDATE charge_attempts SET state = 'superseded'
WHERE attempt_id = $1 AND state NOT IN ('approved', 'declined', 'superseded')
RETURNING attempt_id;

-- name: claim_first_charge
-- $1 payment id, $2 claimed_by (the claim's token), $3 lease seconds, $4 lock_timeout (ms)
-- for this statement's implicit transaction (set before any row lock). The worker's first
-- read of a payment and its common claim in ONE statement, sent outside a transaction:
-- the payment (the columns of `payment_for_processing`) and, when it is pending and never
-- had an attempt, attempt 1 under its row lock (the lock order of every claim: payment,
-- then its attempts). Only a pending payment is locked; any other (a duplicate delivery
-- of a final one) is read without a lock. The columns are read as the statement's
-- snapshot saw them, which the lock cannot change for what the worker uses (amount,
-- currency, merchant, URL are fixed at creation); a payment that stopped being pending
-- while this waited for its lock reads as pending with no claim, and the full claim then
-- locks it and decides. `attempt_id` is NULL when the full
-- claim must decide: the payment is not pending, it has an attempt, or a concurrent claim
-- inserted one (the unique keys refuse a second attempt 1 or a second open attempt; DO
-- NOTHING waits for that claim's commit first). No row: no such payment.
WITH bound AS MATERIALIZED (
    SELECT pg_catalog.set_config('lock_timeout', $4::integer::text, true)
), locked AS MATERIALIZED (
    -- "Not final" rather than status = 'pending': that literal would let the planner walk
    -- the partial index payments_pending_created_idx (every payment in flight) and filter
    -- it by id, instead of the key (payments_pkey); same rows, given payments_status_valid.
    SELECT p.id FROM payments p, bound
    WHERE p.id = $1 AND p.status NOT IN ('succeeded', 'failed')
    FOR UPDATE OF p
), payment AS MATERIALIZED (
    SELECT p.id, p.merchant_id, p.amount, p.currency, p.status, p.webhook_url,
           p.webhook_delivered_at, p.webhook_attempts, p.trace_id, p.processed_at,
           p.created_at, m.webhook_secret, a.scale
    FROM payments p
    JOIN merchants m ON m.id = p.merchant_id
    JOIN assets a ON a.code = p.currency
    WHERE p.id = $1
), claimed AS (
    INSERT INTO charge_attempts (payment_id, attempt, claimed_by, lease_until)
    SELECT id, 1, $2, clock_timestamp() + make_interval(secs => $3) FROM locked
    WHERE NOT EXISTS (SELECT 1 FROM charge_attempts a WHERE a.payment_id = $1)
    ON CONFLICT DO NOTHING
    RETURNING attempt_id
)
SELECT payment.*, claimed.attempt_id FROM payment LEFT JOIN claimed ON true;

-- name: insert_charge_attempt
-- $1 payment id, $2 attempt number, $3 claimed_by (the claim's token), $4 lease seconds.
-- charge_attempts_one_open refuses a second open attempt of the payment.
INSERT INTO charge_attempts (payment_id, attempt, claimed_by, lease_until)
VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))
RETURNING attempt_id;

-- name: release_charge_claim
-- $1 attempt id, $2 claimed_by. Ends the lease now (the gateway call failed), so the
-- next delivery takes the attempt over at once and asks the gateway what happened.
-- state 'claimed' is spelled as the states it is not, so that only the key's index can
-- serve the lookup (as in supersede_charge_attempt).
UPDATE charge_attempts SET lease_until = clock_timestamp()
WHERE attempt_id = $1 AND claimed_by = $2
  AND state NOT IN ('approved', 'declined', 'superseded', 'needs_review');

-- name: record_charge_answer
-- $1 payment id, $2 approved|declined, $3 reason, $4 gateway reference. Records the
-- gateway's answer on the payment's open attempt (whoever holds it: the answer is the
-- gateway's, not the worker's); no row when an answer is already recorded.
UPDATE charge_attempts
SET state = $2, reason = $3, gateway_reference = $4, answered_at = clock_timestamp()
WHERE payment_id = $1 AND state IN ('claimed', 'needs_review')
RETURNING attempt_id;

-- name: mark_charge_needs_review
-- $1 payment id, $2 reason. The open attempt waits for an operator; the payment stays
-- pending.
UPDATE charge_attempts SET state = 'needs_review', reason = left($2, 1024)
WHERE payment_id = $1 AND state IN ('claimed', 'needs_review')
RETURNING attempt_id, attempt;

-- name: charges_needing_review
-- $1 page size. Unanswered attempts parked for an operator, oldest first.
SELECT c.payment_id, c.attempt, c.claimed_at, c.reason, p.amount, p.currency, p.merchant_id
FROM charge_attempts c
JOIN payments p ON p.id = c.payment_id
WHERE c.state = 'needs_review'
ORDER BY c.claimed_at
LIMIT $1;

-- name: open_merchant_account
-- $1 merchant id, $2 asset. Race-free thanks to accounts_merchant_settlement_unique.
INSERT INTO accounts (asset, merchant_id, settlement) VALUES ($2, $1, true)
ON CONFLICT (merchant_id, asset) WHERE settlement DO NOTHING;

-- name: merchant_account
-- $1 merchant id, $2 asset
SELECT id FROM accounts WHERE merchant_id = $1 AND asset = $2 AND settlement;

-- name: insert_payment
-- $1 merchant id, $2 amount, $3 currency, $4 idempotency key, $5 webhook url, $6 trace id
INSERT INTO payments (merchant_id, amount, currency, idempotency_key, webhook_url, trace_id)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id;

-- name: resolve_payment_dead_letters
-- $1 payment id (as the DLQ's subject text), $2 operator, $3 resolution. A payment's open
-- dead letters, resolved with it: the few unresolved rows are found through
-- dead_letter_queue_unresolved_idx (there is no index on the subject, and no key to use).
UPDATE dead_letter_queue SET resolved_at = now(), resolved_by = $2, resolution = $3
WHERE resolved_at IS NULL AND source = 'payment' AND subject_id = $1
RETURNING id;

-- name: payment_for_replay
-- $1 payment id: the payment a manual DLQ replay of its processing re-drives, locked
SELECT id, status, trace_id FROM payments WHERE id = $1 FOR UPDATE;

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

-- ---- gateway recon: the books' gateway legs against the gateway's settlement record

-- name: gateway_legs_between
-- $1 from, $2 to (timestamptz, half-open): the gateway:<currency> legs of merchant
-- payment credits posted in the period, per payment (the amount the gateway owes)
SELECT substr(l.source_event_id, length('payment:') + 1) AS payment_id,
       s.asset AS currency, -sum(l.amount) AS amount, min(l.created_at) AS posted_at
FROM ledger_legs l JOIN ledger_accounts s ON s.code = l.ledger_account
WHERE s.kind = 'gateway' AND l.source_event_id LIKE 'payment:%'
  AND l.created_at >= $1 AND l.created_at < $2
GROUP BY l.source_event_id, s.asset;

-- name: gateway_legs_of
-- $1 payment ids (text[]): their gateway legs whenever posted
SELECT substr(l.source_event_id, length('payment:') + 1) AS payment_id,
       s.asset AS currency, -sum(l.amount) AS amount, min(l.created_at) AS posted_at
FROM ledger_legs l JOIN ledger_accounts s ON s.code = l.ledger_account
WHERE s.kind = 'gateway'
  AND l.source_event_id = ANY (SELECT 'payment:' || unnest($1::text[]))
GROUP BY l.source_event_id, s.asset;
