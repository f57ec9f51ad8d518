-- name: insert_endpoint
-- $1 merchant, $2 url, $3 description, $4 enabled events, $5 enabled, $6 secret
INSERT INTO webhook_endpoints (merchant_id, url, description, enabled_events, enabled, secret,
                               disabled_at, disabled_reason)
VALUES ($1, $2, $3, $4, $5, $6,
        CASE WHEN $5 THEN NULL ELSE now() END, CASE WHEN $5 THEN NULL ELSE 'merchant' END)
RETURNING *;

-- name: lock_merchant_endpoints
-- $1 merchant: serialises its endpoint creations until the transaction ends, so the
-- count below and the insert after it cannot be raced past MAX_ENDPOINTS
SELECT pg_advisory_xact_lock(hashtext('payflow.webhook_endpoints'), hashtext($1::uuid::text));

-- name: count_endpoints
-- $1 merchant: its endpoints not deleted (enabled or not)
SELECT count(*) FROM webhook_endpoints WHERE merchant_id = $1 AND deleted_at IS NULL;

-- name: get_endpoint
-- $1 endpoint id, $2 merchant, $3 admin? (an admin reads every merchant's). Deleted ones
-- are gone for the API.
SELECT * FROM webhook_endpoints
WHERE id = $1 AND deleted_at IS NULL AND ($3::boolean OR merchant_id = $2);

-- name: endpoint_position
-- $1 endpoint id, $2 merchant, $3 admin?: where a list page ended (created_at, id), deleted
-- endpoints included, so a page's last endpoint deleted meanwhile still continues the list
SELECT created_at, id FROM webhook_endpoints
WHERE id = $1 AND ($3::boolean OR merchant_id = $2);

-- name: list_endpoints
-- $1 merchant, $2 admin?, $3 limit, $4 after (created_at, id) cursor time, $5 cursor id
SELECT * FROM webhook_endpoints
WHERE deleted_at IS NULL AND ($2::boolean OR merchant_id = $1)
  AND ($4::timestamptz IS NULL OR (created_at, id) > ($4, $5::uuid))
ORDER BY created_at, id
LIMIT $3;

-- name: update_endpoint
-- $1 endpoint id, $2 merchant, $3 admin?, $4 url (NULL: unchanged), $5 description, $6
-- events, $7 enabled. Enabling clears the failure streak and the disabled mark.
UPDATE webhook_endpoints SET
    url = coalesce($4, url),
    description = coalesce($5, description),
    enabled_events = coalesce($6, enabled_events),
    enabled = coalesce($7, enabled),
    failing_since = CASE WHEN $7 IS TRUE AND NOT enabled THEN NULL ELSE failing_since END,
    disabled_at = CASE WHEN $7 IS TRUE THEN NULL
                       WHEN $7 IS FALSE AND enabled THEN now() ELSE disabled_at END,
    disabled_reason = CASE WHEN $7 IS TRUE THEN NULL
                           WHEN $7 IS FALSE AND enabled THEN 'merchant' ELSE disabled_reason END,
    updated_at = now()
WHERE id = $1 AND deleted_at IS NULL AND ($3::boolean OR merchant_id = $2)
RETURNING *;

-- name: delete_endpoint
-- $1 endpoint id, $2 merchant, $3 admin?. Soft delete: disabled for good, hidden; its
-- deliveries and audit keep naming it.
UPDATE webhook_endpoints
SET deleted_at = now(), enabled = false, disabled_at = coalesce(disabled_at, now()),
    disabled_reason = 'deleted', updated_at = now()
WHERE id = $1 AND deleted_at IS NULL AND ($3::boolean OR merchant_id = $2)
RETURNING id;

-- name: lock_endpoint_for_rotation
-- $1 endpoint id, $2 merchant, $3 admin?: the endpoint row locked until the rotation
-- commits, so rotations of one endpoint run one after another
SELECT id FROM webhook_endpoints
WHERE id = $1 AND deleted_at IS NULL AND ($3::boolean OR merchant_id = $2)
FOR UPDATE;

-- name: rotate_endpoint_secret
-- $1 endpoint id, $2 merchant, $3 admin?, $4 new secret, $5 overlap seconds: the current
-- secret signs too until now + overlap (0: no overlap).
UPDATE webhook_endpoints SET
    previous_secret = CASE WHEN $5::float8 > 0 THEN secret END,
    previous_secret_until = CASE WHEN $5::float8 > 0
                                 THEN now() + make_interval(secs => $5::float8) END,
    secret = $4, updated_at = now()
WHERE id = $1 AND deleted_at IS NULL AND ($3::boolean OR merchant_id = $2)
RETURNING *;

-- name: claim_delivery
-- $1 delivery id, $2 lease token, $3 lease seconds. One autocommitted statement: a pending
-- delivery of an enabled endpoint with no live lease takes the lease; the row carries what
-- the POST needs (url, secrets valid now, the event). No row: delivered, dead, leased by
-- another send, or its endpoint is disabled (the sweep leaves those until re-enabled).
WITH leased AS (
    UPDATE webhook_deliveries d
    SET lease_token = $2, lease_until = clock_timestamp() + make_interval(secs => $3::float8),
        next_attempt_at = clock_timestamp() + make_interval(secs => $3::float8),
        updated_at = now()
    FROM webhook_endpoints e
    WHERE d.id = $1 AND e.id = d.endpoint_id AND e.enabled AND d.state = 'pending'
      AND coalesce(d.lease_until <= clock_timestamp(), true)
    RETURNING d.id, d.event_id, d.endpoint_id, d.attempts
)
SELECT l.id, l.event_id, l.endpoint_id, l.attempts, e.url, e.secret,
       CASE WHEN e.previous_secret_until > clock_timestamp() THEN e.previous_secret END
           AS previous_secret,
       ev.type, ev.data, ev.created_at
FROM leased l
JOIN webhook_endpoints e ON e.id = l.endpoint_id
JOIN merchant_events ev ON ev.id = l.event_id;

-- name: record_delivery_attempt
-- $1 delivery id, $2 lease token, $3 delivered?, $4 HTTP status (NULL: no answer), $5
-- duration ms, $6 error (NULL for a 2xx), $7 seconds until the retry is due (NULL: none
-- follows). One autocommitted statement: counts the attempt, appends its log row, ends this
-- send's lease, marks a 2xx delivered (a 2xx recorded late still counts), and keeps the
-- endpoint's failure streak (`failing_since`: set by the first failure, cleared by a 2xx).
-- The endpoint's row is written only when the streak starts or ends, as this statement's
-- snapshot sees it: every delivery to an endpoint would otherwise queue on that one row
-- lock and pay its write. A change committing meanwhile can leave the streak a step
-- behind until the next attempt; the disabling job checks the deliveries themselves.
-- $8 the held `endpoint.deliver` job of the finalizing worker's own send
-- (payflow.webhooks.endpoints.direct; NULL for a send of the queue): a delivery deletes
-- it, a failure makes it due when the retry is ($7 seconds from now), unless a relay
-- published it already or holds it right now (SKIP LOCKED: its message then meets the
-- delivery's state). "Unpublished" as num_nulls(published_at) = 1, so the job is found by
-- its key, never through the partial index outbox_due_idx.
WITH counted AS (
    UPDATE webhook_deliveries SET
        attempts = attempts + 1,
        state = CASE WHEN $3::boolean THEN 'delivered' ELSE state END,
        delivered_at = CASE WHEN $3::boolean THEN coalesce(delivered_at, clock_timestamp())
                            ELSE delivered_at END,
        dead_at = CASE WHEN $3::boolean THEN NULL ELSE dead_at END,
        last_http_status = $4,
        next_attempt_at = CASE WHEN lease_token = $2
            THEN clock_timestamp() + make_interval(secs => coalesce($7::float8, 0))
            ELSE next_attempt_at END,
        lease_until = CASE WHEN lease_token = $2 THEN NULL ELSE lease_until END,
        lease_token = CASE WHEN lease_token = $2 THEN NULL ELSE lease_token END,
        updated_at = now()
    WHERE id = $1
    RETURNING id, endpoint_id, attempts
), logged AS (
    INSERT INTO webhook_delivery_attempts (delivery_id, http_status, duration_ms, error)
    SELECT id, $4, $5, left($6, 500) FROM counted
), streak AS (
    UPDATE webhook_endpoints e SET failing_since = CASE
        WHEN $3::boolean THEN NULL ELSE coalesce(e.failing_since, clock_timestamp()) END
    FROM counted
    WHERE e.id = counted.endpoint_id
      AND CASE WHEN $3::boolean THEN e.failing_since IS NOT NULL ELSE e.failing_since IS NULL END
), held AS MATERIALIZED (
    SELECT o.id FROM outbox o
    WHERE o.id = $8::bigint AND num_nulls(o.published_at) = 1
    FOR UPDATE SKIP LOCKED
), settled AS (
    DELETE FROM outbox WHERE $3::boolean AND id = (SELECT id FROM held)
), due AS (
    UPDATE outbox
    SET next_attempt_at = clock_timestamp() + make_interval(secs => coalesce($7::float8, 0))
    WHERE NOT $3::boolean AND id = (SELECT id FROM held)
    RETURNING id
), wake AS (
    SELECT pg_notify('payflow_outbox', '') FROM due WHERE coalesce($7::float8, 0) <= 0
)
-- A cross join: the planner keeps it, so `wake` runs.
SELECT attempts FROM counted, (SELECT count(*) FROM wake) AS woken;

-- name: leased_deliveries
-- $1 delivery ids, $2 lease token: those of the deliveries still pending under this
-- send's live lease whose endpoint is enabled, with what the POST needs (as claim_delivery
-- returns it), by id. The finalizing worker's own sends read them after the finalize's
-- commit took the lease (payflow.webhooks.endpoints.direct); one left out is handed back.
SELECT d.id, d.event_id, d.endpoint_id, d.attempts, e.url, e.secret,
       CASE WHEN e.previous_secret_until > clock_timestamp() THEN e.previous_secret END
           AS previous_secret,
       ev.type, ev.data, ev.created_at
FROM webhook_deliveries d
JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.enabled
JOIN merchant_events ev ON ev.id = d.event_id
WHERE d.id = ANY ($1::bigint[]) AND d.lease_token = $2 AND d.state = 'pending'
  AND d.lease_until > clock_timestamp()
ORDER BY d.id;

-- name: hand_back_direct_deliveries
-- $1 delivery ids, $2 lease token of the finalizing worker's own sends, $3 their held
-- `endpoint.deliver` jobs. No POST was made (started too late in the lease, the endpoint
-- disabled meanwhile, no send slot, a refused URL, a stop before the request went out):
-- the leases end and the held jobs are due now, so the relay hands them to the endpoints
-- queue, whose sender decides each. A job a relay holds right now is skipped (it is being
-- published).
WITH released AS (
    UPDATE webhook_deliveries
    SET lease_token = NULL, lease_until = NULL, next_attempt_at = clock_timestamp()
    WHERE id = ANY ($1::bigint[]) AND lease_token = $2
), due AS (
    UPDATE outbox o SET next_attempt_at = now()
    WHERE o.id IN (SELECT h.id FROM outbox h
                   WHERE h.id = ANY ($3::bigint[]) AND num_nulls(h.published_at) = 1
                   FOR UPDATE SKIP LOCKED)
    RETURNING o.id
)
SELECT pg_notify('payflow_outbox', '') FROM (SELECT count(*) AS n FROM due) AS d WHERE d.n > 0;

-- name: release_delivery
-- $1 delivery id, $2 lease token: the send ended without a POST; due again now.
UPDATE webhook_deliveries
SET lease_token = NULL, lease_until = NULL, next_attempt_at = clock_timestamp()
WHERE id = $1 AND lease_token = $2;

-- name: mark_delivery_dead
-- $1 delivery id. Retries exhausted: pending → dead (a row only for the transition, so the
-- caller writes one DLQ row). A live lease (another send POSTing) keeps it pending.
UPDATE webhook_deliveries
SET state = 'dead', dead_at = now(), updated_at = now()
WHERE id = $1 AND state = 'pending' AND coalesce(lease_until <= clock_timestamp(), true)
RETURNING id, attempts;

-- name: requeue_delivery
-- $1 delivery id. A redelivery or DLQ replay: pending again, due now, its sweep wait
-- restarting. Returns the row (no row: unknown delivery).
UPDATE webhook_deliveries
SET state = 'pending', dead_at = NULL, delivered_at = NULL, sweeps = 0,
    next_attempt_at = now(), updated_at = now()
WHERE id = $1
RETURNING id, event_id, endpoint_id;

-- name: ensure_delivery
-- $1 event id, $2 endpoint id, $3 merchant: the (event, endpoint) delivery, made when the
-- endpoint did not exist or did not want the event then (a redelivery to it).
INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id) VALUES ($1, $2, $3)
ON CONFLICT ON CONSTRAINT webhook_deliveries_once
DO UPDATE SET updated_at = now()
RETURNING id;

-- name: insert_redelivery
-- $1 event id, $2 endpoint id, $3 delivery id, $4 merchant, $5 who asked
INSERT INTO webhook_redeliveries (event_id, endpoint_id, delivery_id, merchant_id, requested_by)
VALUES ($1, $2, $3, $4, $5)
RETURNING id, requested_at;

-- name: delivery_for_replay
-- $1 delivery id: the delivery a DLQ replay re-drives, locked
SELECT id, state FROM webhook_deliveries WHERE id = $1 FOR UPDATE;

-- name: event_scoped
-- $1 event id, $2 merchant, $3 admin?
SELECT id, merchant_id, type, subject_id, created_at FROM merchant_events
WHERE id = $1 AND ($3::boolean OR merchant_id = $2);

-- name: redeliverable_endpoints
-- $1 event id, $2 merchant of the event, $3 endpoint id (NULL: every endpoint that has a
-- delivery of it, or that is enabled and wants its type), with `enabled`. Locked FOR SHARE
-- until the redelivery commits: a delete (or disable) of one waits for it, then cancels
-- what it queued; one deleted first is not found (the lock re-reads `deleted_at`).
SELECT e.id, e.enabled FROM webhook_endpoints e
JOIN merchant_events ev ON ev.id = $1
WHERE e.merchant_id = $2 AND e.deleted_at IS NULL
  AND ($3::uuid IS NULL AND (
          EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = $1 AND d.endpoint_id = e.id)
          OR (e.enabled AND ('*' = ANY (e.enabled_events) OR ev.type = ANY (e.enabled_events))))
       OR e.id = $3)
ORDER BY e.created_at, e.id
FOR SHARE OF e;

-- name: cancel_endpoint_deliveries
-- $1 endpoint id: a deleted endpoint's pending deliveries end dead (never sent: nothing
-- would ever claim them); a send POSTing now may still record its 2xx as delivered.
UPDATE webhook_deliveries
SET state = 'dead', dead_at = now(), next_attempt_at = now(), updated_at = now()
WHERE endpoint_id = $1 AND state = 'pending'
RETURNING id;

-- name: deliveries_of_endpoint
-- $1 endpoint id, $2 limit, $3 before this delivery id (NULL: the newest first)
SELECT d.*, ev.type AS event_type FROM webhook_deliveries d
JOIN merchant_events ev ON ev.id = d.event_id
WHERE d.endpoint_id = $1 AND ($3::bigint IS NULL OR d.id < $3)
ORDER BY d.id DESC
LIMIT $2;

-- name: deliveries_of_event
-- $1 event id
SELECT d.*, ev.type AS event_type FROM webhook_deliveries d
JOIN merchant_events ev ON ev.id = d.event_id
WHERE d.event_id = $1
ORDER BY d.id;

-- name: attempts_of_deliveries
-- $1 delivery ids
SELECT delivery_id, attempted_at, http_status, duration_ms, error
FROM webhook_delivery_attempts WHERE delivery_id = ANY ($1::bigint[])
ORDER BY delivery_id, id;

-- name: redeliveries_of_event
-- $1 event id
SELECT endpoint_id, delivery_id, requested_by, requested_at FROM webhook_redeliveries
WHERE event_id = $1 ORDER BY id;

-- name: overdue_deliveries
-- $1 first wait (s), $2 wait cap (s), $3 limit. Pending deliveries of enabled endpoints
-- whose send was expected back (its lease's end, its retry tier's end) more than the wait
-- ago (doubling per sweep), with no live lease and no unpublished outbox row for them.
SELECT d.id FROM webhook_deliveries d
JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.enabled
WHERE d.state = 'pending'
  AND d.next_attempt_at < now() - make_interval(
        secs => least($2::float8, $1::float8 * power(2, least(d.sweeps, 40))))
  AND coalesce(d.lease_until, '-infinity') < now()
  AND NOT EXISTS (
      SELECT 1 FROM outbox o
      WHERE o.published_at IS NULL AND o.topic = 'endpoint.deliver'
        AND o.payload ->> 'delivery_id' = d.id::text
  )
ORDER BY d.next_attempt_at
LIMIT $3
FOR UPDATE OF d SKIP LOCKED;

-- name: count_delivery_sweep
-- $1 delivery id: one more re-announcement, now
UPDATE webhook_deliveries SET sweeps = sweeps + 1, next_attempt_at = now()
WHERE id = $1 RETURNING sweeps;

-- name: disable_failing_endpoints
-- $1 days. Enabled endpoints whose every delivery attempt has failed since more than $1
-- days ago are disabled ('failing'); returns them. `failing_since` is the hint, the
-- deliveries the proof: a 2xx recorded while a failure's streak start was committing
-- may have left it set (`record_delivery_attempt` writes the endpoint only on a change
-- it sees), so an endpoint with a delivery delivered since then is kept.
UPDATE webhook_endpoints e
SET enabled = false, disabled_at = now(), disabled_reason = 'failing', updated_at = now()
WHERE e.enabled AND e.failing_since < now() - make_interval(secs => $1::float8 * 86400)
  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d
                  WHERE d.endpoint_id = e.id AND d.delivered_at >= e.failing_since)
RETURNING e.id, e.merchant_id, e.url, e.failing_since;
