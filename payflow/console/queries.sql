-- Console sessions and the console's read-only views. A scope parameter is the signed-in
-- merchant's id, or NULL for an admin (who sees every merchant): the same tenancy as the API.

-- name: insert_session
-- $1 sha-256 hex of the session token, $2 merchant id, $3 csrf token, $4 lifetime in seconds
INSERT INTO console_sessions (token_sha256, merchant_id, csrf_token, expires_at)
VALUES ($1, $2, $3, now() + make_interval(secs => $4::double precision));

-- name: live_session
-- $1 sha-256 hex of the session token: the session if not revoked and not expired
SELECT s.merchant_id, s.csrf_token, m.name, m.is_admin
FROM console_sessions s JOIN merchants m ON m.id = s.merchant_id
WHERE s.token_sha256 = $1 AND s.revoked_at IS NULL AND s.expires_at > now();

-- name: revoke_session
-- $1 sha-256 hex of the session token
UPDATE console_sessions SET revoked_at = now() WHERE token_sha256 = $1 AND revoked_at IS NULL;

-- name: delete_expired_sessions
-- (no parameters) sessions expired or revoked more than a day ago, a bounded batch
DELETE FROM console_sessions WHERE token_sha256 IN (
    SELECT token_sha256 FROM console_sessions
    WHERE expires_at < now() - interval '1 day' OR revoked_at < now() - interval '1 day'
    LIMIT 1000
);

-- name: list_payments
-- $1 scope merchant id or null, $2 status or null, $3 created from or null, $4 created before
-- or null, $5 cursor created_at or null, $6 cursor id, $7 page size (+1 to see a next page)
SELECT p.id, p.merchant_id, m.name AS merchant_name, p.amount, p.currency, a.scale, p.status,
       p.created_at, p.processed_at, p.webhook_attempts, p.webhook_delivered_at, p.webhook_dead_at
FROM payments p
JOIN assets a ON a.code = p.currency
JOIN merchants m ON m.id = p.merchant_id
WHERE ($1::uuid IS NULL OR p.merchant_id = $1)
  AND ($2::text IS NULL OR p.status = $2)
  AND ($3::timestamptz IS NULL OR p.created_at >= $3)
  AND ($4::timestamptz IS NULL OR p.created_at < $4)
  AND ($5::timestamptz IS NULL OR (p.created_at, p.id) < ($5, $6::uuid))
ORDER BY p.created_at DESC, p.id DESC
LIMIT $7;

-- name: get_payment
-- $1 payment id, $2 scope merchant id or null
SELECT p.id, p.merchant_id, m.name AS merchant_name, p.amount, p.currency, a.scale, p.status,
       p.description, p.idempotency_key, p.webhook_url, p.created_at, p.processed_at,
       p.webhook_attempts, p.webhook_delivered_at, p.webhook_dead_at, p.trace_id
FROM payments p
JOIN assets a ON a.code = p.currency
JOIN merchants m ON m.id = p.merchant_id
WHERE p.id = $1 AND ($2::uuid IS NULL OR p.merchant_id = $2);

-- name: charge_attempts_of_payment
-- $1 payment id; oldest first
SELECT attempt, state, claimed_at, answered_at, reason
FROM charge_attempts WHERE payment_id = $1 ORDER BY attempt;

-- name: event_with_posting
-- $1 event id: the event and the time its ledger entry was written (null: not posted)
SELECT e.event_id, e.status, e.event_type, e.updated_at,
       (SELECT min(b.created_at) FROM balance_events b WHERE b.source_event_id = e.event_id)
           AS posted_at
FROM payment_events e WHERE e.event_id = $1;

-- name: list_accounts
-- $1 scope merchant id or null, $2 cursor account id or null, $3 page size (+1)
SELECT acc.*, s.scale, m.name AS merchant_name
FROM accounts acc
JOIN assets s ON s.code = acc.asset
LEFT JOIN merchants m ON m.id = acc.merchant_id
WHERE ($1::uuid IS NULL OR acc.merchant_id = $1)
  AND ($2::uuid IS NULL OR acc.id > $2)
ORDER BY acc.id
LIMIT $3;

-- name: get_account
-- $1 account id, $2 scope merchant id or null
SELECT acc.*, s.scale, m.name AS merchant_name
FROM accounts acc
JOIN assets s ON s.code = acc.asset
LEFT JOIN merchants m ON m.id = acc.merchant_id
WHERE acc.id = $1 AND ($2::uuid IS NULL OR acc.merchant_id = $2);

-- name: ledger_entries
-- $1 account id, $2 cursor entry id or null (entries older than it), $3 page size (+1)
SELECT id, amount, event_type, source_event_id, balance_after, created_at
FROM balance_events
WHERE account_id = $1 AND ($2::bigint IS NULL OR id < $2)
ORDER BY id DESC
LIMIT $3;

-- name: list_events
-- $1 scope merchant id or null, $2 status or null, $3 cursor created_at or null,
-- $4 cursor event id, $5 page size (+1)
SELECT e.event_id, e.account_id, e.amount, e.event_type, e.status, e.retry_count,
       e.last_error, e.created_at, e.updated_at, acc.asset, s.scale
FROM payment_events e
JOIN accounts acc ON acc.id = e.account_id
JOIN assets s ON s.code = acc.asset
WHERE ($1::uuid IS NULL OR acc.merchant_id = $1)
  AND ($2::text IS NULL OR e.status = $2)
  AND ($3::timestamptz IS NULL OR (e.created_at, e.event_id) < ($3, $4::text))
ORDER BY e.created_at DESC, e.event_id DESC
LIMIT $5;

-- name: get_event
-- $1 event id, $2 scope merchant id or null
SELECT e.event_id, e.account_id, e.amount, e.event_type, e.status, e.retry_count,
       e.last_error, e.trace_id, e.created_at, e.updated_at, acc.asset, s.scale
FROM payment_events e
JOIN accounts acc ON acc.id = e.account_id
JOIN assets s ON s.code = acc.asset
WHERE e.event_id = $1 AND ($2::uuid IS NULL OR acc.merchant_id = $2);

-- name: posting_records
-- $1 posting idempotency keys (text[]): the recorded outcomes
SELECT idempotency_key, event_id, outcome, created_at
FROM processed_events WHERE idempotency_key = ANY($1::text[]);

-- name: ledger_entries_of_event
-- $1 event id
SELECT id, account_id, amount, event_type, balance_after, created_at
FROM balance_events WHERE source_event_id = $1 ORDER BY id;

-- name: list_unmatched
-- $1 cursor created_at or null, $2 cursor event id, $3 page size (+1)
SELECT event_id, reason, chain, address, asset, amount, tx_hash, detail, created_at, reviewed_at
FROM unmatched_provider_events
WHERE ($1::timestamptz IS NULL OR (created_at, event_id) < ($1, $2::text))
ORDER BY created_at DESC, event_id DESC
LIMIT $3;

-- name: get_unmatched
-- $1 event id: the row, its parsed payload as text and the raw delivery bytes if kept
SELECT u.event_id, u.reason, u.chain, u.address, u.asset, u.amount, u.tx_hash, u.detail,
       u.created_at, u.reviewed_at, u.trace_id, u.payload::text AS payload_text, d.body
FROM unmatched_provider_events u
LEFT JOIN provider_deliveries d ON d.body_sha256 = u.delivery_sha256
WHERE u.event_id = $1;

-- name: activity_per_minute
-- $1 scope merchant id or null, $2 start of the window (a whole minute).
-- One row per (series, minute) with a count; minutes without activity are absent.
SELECT 'payments' AS series, date_trunc('minute', created_at) AS minute, count(*) AS n
FROM payments WHERE created_at >= $2 AND ($1::uuid IS NULL OR merchant_id = $1)
GROUP BY 2
UNION ALL
SELECT 'payments_' || status, date_trunc('minute', processed_at), count(*)
FROM payments
WHERE processed_at >= $2 AND status <> 'pending' AND ($1::uuid IS NULL OR merchant_id = $1)
GROUP BY status, 2
UNION ALL
SELECT 'deposits', date_trunc('minute', e.created_at), count(*)
FROM payment_events e JOIN accounts acc ON acc.id = e.account_id
WHERE e.event_type = 'deposit' AND e.created_at >= $2
  AND ($1::uuid IS NULL OR acc.merchant_id = $1)
GROUP BY 2
UNION ALL
SELECT 'deposits_' || e.status, date_trunc('minute', e.updated_at), count(*)
FROM payment_events e JOIN accounts acc ON acc.id = e.account_id
WHERE e.event_type = 'deposit' AND e.status IN ('confirmed', 'failed') AND e.updated_at >= $2
  AND ($1::uuid IS NULL OR acc.merchant_id = $1)
GROUP BY e.status, 2;
