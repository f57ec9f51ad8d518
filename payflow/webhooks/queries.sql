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

-- name: hand_back_direct_webhook
-- $1 payment id, $2 lease token of the worker's own send, $3 its held `webhook.deliver`
-- job. The send ended without a POST (started too late in its lease, a refused URL, a
-- stop before the request went out): its lease ends and the held job is due now, so the
-- relay hands the job to a chain of the webhooks queue, which decides it. $4 lock_timeout (ms) for this
-- statement's implicit transaction (set before the row lock).
WITH bound AS MATERIALIZED (
    SELECT pg_catalog.set_config('lock_timeout', $4::integer::text, true)
), released AS (
    UPDATE payments
    SET webhook_lease_token = NULL, webhook_lease_until = NULL,
        webhook_next_attempt_at = clock_timestamp()
    FROM bound
    WHERE id = $1 AND webhook_lease_token = $2
), due AS (
    -- SKIP LOCKED: a relay holding the row is publishing it; never wait on one.
    UPDATE outbox o SET next_attempt_at = now()
    FROM bound
    -- num_nulls: found by its key, never through outbox_due_idx (record_webhook_attempt)
    WHERE o.id = (SELECT h.id FROM outbox h
                  WHERE h.id = $3 AND num_nulls(h.published_at) = 1 FOR UPDATE SKIP LOCKED)
      AND o.next_attempt_at > now()
    RETURNING o.id
)
SELECT pg_notify('payflow_outbox', '') FROM due;

-- name: lock_payment_for_webhook
-- $1 payment id. Locks the row for the claim's short transaction only (a lease, not the
-- lock, keeps two sends of one job apart); `lease_live` is true while another send's lease
-- runs; `webhook_chain_*` name the chain that owns the job and `overdue_s` says how long
-- ago it was expected back (negative: not yet; NULL: no chain yet). Waits at most
-- lock_timeout (55P03, retryable) behind another short transaction.
SELECT p.id, p.merchant_id, p.amount, p.currency, p.status, p.webhook_url,
       p.webhook_delivered_at, p.webhook_dead_at, p.webhook_attempts, p.trace_id,
       p.processed_at, p.created_at, m.webhook_secret, a.scale,
       coalesce(p.webhook_lease_until > clock_timestamp(), false) AS lease_live,
       p.webhook_chain_message, p.webhook_chain_attempt,
       extract(epoch FROM clock_timestamp() - p.webhook_next_attempt_at)::float8 AS overdue_s
FROM payments p
JOIN merchants m ON m.id = p.merchant_id
JOIN assets a ON a.code = p.currency
WHERE p.id = $1
FOR UPDATE OF p;

-- name: resolve_late_webhook_dead_letters
-- $1 payment id (as the DLQ's subject text), $2 who recorded the delivery (the send's lease
-- token), $3 the HTTP status answered. A 2xx recorded after the webhook was dead-lettered
-- (record_webhook_attempt's was_dead): its open dead letters are resolved as delivered
-- late, found through dead_letter_queue_unresolved_idx as resolve_payment_dead_letters.
UPDATE dead_letter_queue
SET resolved_at = now(), resolved_by = 'webhook sender ' || $2,
    resolution = 'delivered late: the merchant answered HTTP ' || $3::integer
                 || ' after the webhook was dead-lettered'
WHERE resolved_at IS NULL AND source = 'webhook' AND subject_id = $1
RETURNING id;

-- name: claim_fresh_webhook
-- $1 payment id, $2 lease token, $3 lease seconds, $4 message id of the send's chain, $5 its
-- attempt, $6 lock_timeout (ms) for this statement's implicit transaction (set before any
-- lock). The common claim of a send in ONE statement, sent outside a transaction: a final
-- payment whose webhook no chain owns yet (never claimed, or handed back by a replay), not
-- delivered, not dead, with a URL and no live lease, takes the lease as take_webhook_lease
-- does, under its row lock (re-checked after any wait). Returns the row of
-- lock_payment_for_webhook (the lease columns as they were before); no row when the full
-- claim must decide (a duplicate, a retry of an owned chain, a pending payment).
WITH bound AS MATERIALIZED (
    SELECT pg_catalog.set_config('lock_timeout', $6::integer::text, true)
), job AS MATERIALIZED (
    SELECT p.id FROM payments p, bound
    WHERE p.id = $1 AND p.status <> 'pending' AND coalesce(p.webhook_url, '') <> ''
      AND p.webhook_delivered_at IS NULL AND p.webhook_dead_at IS NULL
      AND p.webhook_chain_message IS NULL
      AND NOT coalesce(p.webhook_lease_until > clock_timestamp(), false)
    FOR UPDATE OF p
), leased AS (
    UPDATE payments
    SET webhook_lease_token = $2,
        webhook_lease_until = clock_timestamp() + make_interval(secs => $3),
        webhook_chain_message = $4,
        webhook_chain_attempt = $5,
        webhook_next_attempt_at = clock_timestamp() + make_interval(secs => $3)
    FROM job WHERE payments.id = job.id
    RETURNING payments.id
)
SELECT p.id, p.merchant_id, p.amount, p.currency, p.status, p.webhook_url,
       p.webhook_delivered_at, p.webhook_dead_at, p.webhook_attempts, p.trace_id,
       p.processed_at, p.created_at, m.webhook_secret, a.scale,
       false AS lease_live, p.webhook_chain_message, p.webhook_chain_attempt,
       NULL::float8 AS overdue_s
FROM leased
JOIN payments p ON p.id = leased.id
JOIN merchants m ON m.id = p.merchant_id
JOIN assets a ON a.code = p.currency;

-- name: take_webhook_lease
-- $1 payment id, $2 lease token, $3 lease seconds, $4 message id of the send's chain,
-- $5 its attempt. Under the row lock taken by lock_payment_for_webhook, in the same short
-- transaction: the first of a send. The chain owns the job from now on; it is expected
-- back (recording the result) before the lease ends.
UPDATE payments
SET webhook_lease_token = $2,
    webhook_lease_until = clock_timestamp() + make_interval(secs => $3),
    webhook_chain_message = $4,
    webhook_chain_attempt = $5,
    webhook_next_attempt_at = clock_timestamp() + make_interval(secs => $3)
WHERE id = $1;

-- name: release_webhook_lease
-- $1 payment id, $2 lease token. The send ended without a POST (refused URL, cancelled):
-- its lease ends and its chain is due again at once (a redelivery may go on).
UPDATE payments
SET webhook_lease_token = NULL, webhook_lease_until = NULL,
    webhook_next_attempt_at = clock_timestamp()
WHERE id = $1 AND webhook_lease_token = $2;

-- name: record_webhook_attempt
-- $1 payment id, $2 delivered?, $3 lease token of the send, $4 seconds until the chain's
-- retry comes back from its tier (NULL: no retry follows, the message dead-letters or is
-- redelivered as is), $5 the attempt the chain sends next. Counts the attempt; a delivered
-- time is never overwritten. A 2xx is never dropped, even recorded after the send lost its
-- lease (a paused process): on a webhook a chain dead-lettered meanwhile it sets the
-- delivered time and clears `webhook_dead_at` (delivered or dead-lettered, never both;
-- `was_dead` comes back true, and the sender resolves the open dead letter as delivered
-- late). Ends the send's lease and records when the owning chain is expected back (only
-- this send's: a lease another send took over after this one's expired, and that send's
-- chain, are left alone; a late failure changes nothing but the count and the log); $6 the HTTP status answered (null: no
-- answer), $7 the error text (null for a 2xx), $8 lock_timeout (ms) for this statement's
-- implicit transaction (set before the row lock). The same statement appends the attempt's
-- row to `webhook_attempt_log` (payflow.webhooks.attempts), numbered by the new count,
-- so the counter and the log never disagree. Step 3 of a send, sent outside a
-- transaction: one autocommitted statement. $9 the held `webhook.deliver` job of the
-- finalizing worker's own send (payflow.webhooks.direct; null for a chain's send): a
-- delivery deletes it, a failure makes it due when the retry is ($4 seconds from now),
-- unless a relay published it already or holds it right now (SKIP LOCKED: its message
-- then meets this record).
WITH bound AS MATERIALIZED (
    SELECT pg_catalog.set_config('lock_timeout', $8::integer::text, true)
), job AS MATERIALIZED (
    -- The row as it is once locked (after any wait): whether a chain dead-lettered it.
    SELECT p.id, p.webhook_delivered_at IS NULL AND p.webhook_dead_at IS NOT NULL AS dead
    FROM payments p, bound WHERE p.id = $1 FOR UPDATE OF p
), counted AS (
    UPDATE payments
    SET webhook_attempts = webhook_attempts + 1,
        webhook_delivered_at = CASE
            WHEN $2::boolean AND webhook_delivered_at IS NULL THEN clock_timestamp()
            ELSE webhook_delivered_at
        END,
        webhook_dead_at = CASE
            WHEN $2::boolean AND webhook_delivered_at IS NULL THEN NULL
            ELSE webhook_dead_at
        END,
        webhook_chain_attempt = CASE
            WHEN webhook_lease_token = $3 AND $4::float8 IS NOT NULL
                 AND webhook_chain_message IS NOT NULL THEN $5::integer
            ELSE webhook_chain_attempt
        END,
        webhook_next_attempt_at = CASE
            WHEN webhook_lease_token = $3
            THEN clock_timestamp() + make_interval(secs => coalesce($4::float8, 0))
            ELSE webhook_next_attempt_at
        END,
        webhook_lease_token = CASE
            WHEN webhook_lease_token = $3 THEN NULL ELSE webhook_lease_token
        END,
        webhook_lease_until = CASE
            WHEN webhook_lease_token = $3 THEN NULL ELSE webhook_lease_until
        END
    FROM job
    WHERE payments.id = job.id
    RETURNING payments.id, webhook_attempts, webhook_delivered_at, $2::boolean AND job.dead AS was_dead
), logged AS (
    INSERT INTO webhook_attempt_log (payment_id, attempt, http_status, error)
    SELECT id, webhook_attempts, $6, $7 FROM counted
), held AS MATERIALIZED (
    -- "Unpublished" as num_nulls(published_at) = 1: published_at IS NULL would let the
    -- planner walk the partial index outbox_due_idx (every unpublished row), not the key.
    SELECT o.id FROM outbox o
    WHERE o.id = $9::bigint AND num_nulls(o.published_at) = 1
    FOR UPDATE SKIP LOCKED
), settled AS (
    DELETE FROM outbox WHERE $2::boolean AND id = (SELECT id FROM held)
), due AS (
    UPDATE outbox
    SET next_attempt_at = clock_timestamp() + make_interval(secs => coalesce($4::float8, 0))
    WHERE NOT $2::boolean AND id = (SELECT id FROM held)
    RETURNING id
), wake AS (
    SELECT pg_notify('payflow_outbox', '') FROM due WHERE coalesce($4::float8, 0) <= 0
)
-- A cross join: the planner keeps it, so `wake` runs (a left join to it would be removed).
SELECT webhook_attempts, webhook_delivered_at, was_dead
FROM counted CROSS JOIN (SELECT count(*) FROM wake) AS woken;

-- name: payment_for_webhook
-- $1 payment id: the payment a webhook is built from, with its merchant's webhook secret and its currency's scale
SELECT p.id, p.merchant_id, p.amount, p.currency, p.status, p.webhook_url,
       p.webhook_delivered_at, p.webhook_attempts, p.trace_id, p.processed_at, p.created_at,
       m.webhook_secret, a.scale
FROM payments p
JOIN merchants m ON m.id = p.merchant_id
JOIN assets a ON a.code = p.currency
WHERE p.id = $1;

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

-- name: record_merchant_event
-- $1 merchant, $2 type, $3 subject id, $4 data (a jsonb object). Once per (type, subject),
-- through the one recording function: the new event's id, or NULL when the cause was
-- recorded already.
SELECT merchant_event_record($1, $2, $3, $4);

-- name: list_merchant_events_asc
-- $1 merchant, $2 types (text[]; NULL: every type), $3 created from (inclusive; NULL:
-- no bound), $4 created to (exclusive; NULL: no bound), $5 cursor time and $6 cursor id
-- (the last event of the previous page; NULL: from the start), $7 limit. Oldest first: a
-- keyset scan of merchant_events_merchant_idx (merchant_id, created_at, id), the bounds
-- folded into one row comparison so the index seeks to them.
SELECT id, type, created_at, data FROM merchant_events
WHERE merchant_id = $1
  AND (created_at, id) > (greatest(coalesce($5::timestamptz, '-infinity'),
                                   coalesce($3::timestamptz, '-infinity')),
                          CASE WHEN $5::timestamptz IS NOT NULL
                                AND $5::timestamptz >= coalesce($3::timestamptz, '-infinity')
                               THEN $6::text ELSE '' END)
  AND created_at < coalesce($4::timestamptz, 'infinity')
  AND ($2::text[] IS NULL OR type = ANY ($2::text[]))
ORDER BY created_at, id
LIMIT $7;

-- name: list_merchant_events_desc
-- As list_merchant_events_asc, newest first ($6: the cursor id, events before it).
SELECT id, type, created_at, data FROM merchant_events
WHERE merchant_id = $1
  AND (created_at, id) < (least(coalesce($5::timestamptz, 'infinity'),
                                coalesce($4::timestamptz, 'infinity')),
                          CASE WHEN $5::timestamptz IS NOT NULL
                                AND $5::timestamptz < coalesce($4::timestamptz, 'infinity')
                               THEN $6::text ELSE '' END)
  AND created_at >= coalesce($3::timestamptz, '-infinity')
  AND ($2::text[] IS NULL OR type = ANY ($2::text[]))
ORDER BY created_at DESC, id DESC
LIMIT $7;

-- name: get_merchant_event
-- $1 event id, $2 merchant, $3 is admin: the event if it is the merchant's (any for an
-- admin); no row otherwise
SELECT id, type, created_at, data FROM merchant_events
WHERE id = $1 AND (merchant_id = $2 OR $3);

-- name: cleanup_merchant_events
-- $1 minimum age in days (EVENT_RETENTION_DAYS; the function never goes below 1), $2 batch
-- size: deletes one batch of older events, oldest first; how many rows
SELECT cleanup_merchant_events($1, $2);
