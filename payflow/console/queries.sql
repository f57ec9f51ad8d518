-- Console sessions and the console's read-only views. A scope parameter is the signed-in
-- merchant's id, or NULL for an admin (who sees every merchant): the same tenancy as the API.

-- name: insert_session
-- $1 sha-256 hex of the session token, $2 merchant id, $3 the API key's id it signed in
-- with, $4 csrf token, $5 lifetime in seconds
INSERT INTO console_sessions (token_sha256, merchant_id, api_key_id, csrf_token, expires_at)
VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::double precision));

-- name: live_session
-- $1 sha-256 hex of the session token: the session if neither it nor the API key it
-- signed in with is revoked or expired, with that key's scope
SELECT s.merchant_id, s.api_key_id, s.csrf_token, m.name, m.is_admin, k.scope
FROM console_sessions s
JOIN merchants m ON m.id = s.merchant_id
JOIN api_keys k ON k.id = s.api_key_id
WHERE s.token_sha256 = $1 AND s.revoked_at IS NULL AND s.expires_at > now()
  AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now());

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
-- $1 account id, $2 scope merchant id or null. The scope reads IS NOT DISTINCT FROM, not =
-- (the same rows: a NULL scope is admitted by its own arm): in a custom plan `merchant_id =
-- <constant>` proves the partial index accounts_merchant_idx applies, and the plan walked
-- every account of the merchant, filtered by id, instead of using accounts_pkey. The same
-- in get_event, get_chain_deposit and get_payout.
SELECT acc.*, s.scale, m.name AS merchant_name
FROM accounts acc
JOIN assets s ON s.code = acc.asset
LEFT JOIN merchants m ON m.id = acc.merchant_id
WHERE acc.id = $1 AND ($2::uuid IS NULL OR acc.merchant_id IS NOT DISTINCT FROM $2);

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
-- $1 event id, $2 scope merchant id or null (the scope as in get_account)
SELECT e.event_id, e.account_id, e.amount, e.event_type, e.status, e.retry_count,
       e.last_error, e.trace_id, e.created_at, e.updated_at, acc.asset, s.scale
FROM payment_events e
JOIN accounts acc ON acc.id = e.account_id
JOIN assets s ON s.code = acc.asset
WHERE e.event_id = $1 AND ($2::uuid IS NULL OR acc.merchant_id IS NOT DISTINCT FROM $2);

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

-- Chain deposits, their reports and payouts (the chain pages, chain_pages.py). A deposit,
-- report or payout belongs to the merchant that owns its account.

-- name: chain_counts
-- $1 scope merchant id or null: deposits awaiting finality and payouts not final yet
-- (both read through partial indexes: chain_deposits_pending, payouts_open)
SELECT (SELECT count(*) FROM chain_deposits d JOIN accounts acc ON acc.id = d.account_id
        WHERE d.status = 'verified' AND ($1::uuid IS NULL OR acc.merchant_id = $1))
           AS deposits_awaiting,
       (SELECT count(*) FROM payouts p JOIN accounts acc ON acc.id = p.account_id
        WHERE p.status IN ('held', 'signed', 'sent')
          AND ($1::uuid IS NULL OR acc.merchant_id = $1)) AS payouts_in_flight;

-- name: list_chain_deposits
-- $1 scope merchant id or null, $2 status or null (all), $3 cursor created_at or null,
-- $4 cursor transfer id, $5 page size (+1). `cursor_block` is the scanner's last walked
-- block on that chain (null without a scanner): a lower bound of the confirmations.
SELECT d.transfer_id, d.chain, d.tx_hash, d.position, d.to_address, d.contract,
       d.account_id, d.asset, s.scale, d.amount, d.status, d.block_number, d.block_hash,
       d.sources, d.credit_event_id, d.reversal_event_id, d.shortfall, d.checks,
       d.next_check_at, d.created_at, d.updated_at, d.verified_at, d.credited_at,
       m.name AS merchant_name, c.block_number AS cursor_block
FROM chain_deposits d
JOIN accounts acc ON acc.id = d.account_id
JOIN assets s ON s.code = d.asset
LEFT JOIN merchants m ON m.id = acc.merchant_id
LEFT JOIN chain_scanner_cursors c ON c.chain = d.chain
WHERE ($1::uuid IS NULL OR acc.merchant_id = $1)
  AND ($2::text IS NULL OR d.status = $2)
  AND ($3::timestamptz IS NULL OR (d.created_at, d.transfer_id) < ($3, $4::text))
ORDER BY d.created_at DESC, d.transfer_id DESC
LIMIT $5;

-- name: get_chain_deposit
-- $1 transfer id, $2 scope merchant id or null (the scope as in get_account)
SELECT d.transfer_id, d.chain, d.tx_hash, d.position, d.to_address, d.contract, d.units,
       d.account_id, d.asset, s.scale, d.amount, d.status, d.block_number, d.block_hash,
       d.sources, d.credit_event_id, d.reversal_event_id, d.shortfall, d.checks,
       d.next_check_at, d.trace_id, d.created_at, d.updated_at, d.verified_at,
       d.credited_at, m.name AS merchant_name, c.block_number AS cursor_block,
       c.updated_at AS cursor_at
FROM chain_deposits d
JOIN accounts acc ON acc.id = d.account_id
JOIN assets s ON s.code = d.asset
LEFT JOIN merchants m ON m.id = acc.merchant_id
LEFT JOIN chain_scanner_cursors c ON c.chain = d.chain
WHERE d.transfer_id = $1 AND ($2::uuid IS NULL OR acc.merchant_id IS NOT DISTINCT FROM $2);

-- name: reports_of_transfer
-- $1 transfer id, $2 chain, $3 tx hash, $4 scope merchant id or null: the reports linked
-- to the transfer and the undecided or refuted claims about its transaction (through the
-- (source, chain, tx_hash, claim) unique index), oldest first
-- The scope as IS NOT DISTINCT FROM, as in get_account: `merchant_id = $4` would prove
-- accounts_merchant_idx and read every account of the merchant instead of accounts_pkey.
SELECT r.id, r.source, r.provider_event_id, r.position, r.log_index, r.to_address,
       r.contract, r.units, r.amount, acc.asset, s.scale, r.status, r.transfer_id, r.reason,
       r.checks, r.created_at, r.decided_at
FROM chain_deposit_reports r
JOIN accounts acc ON acc.id = r.account_id
JOIN assets s ON s.code = acc.asset
WHERE r.source = ANY (ARRAY['webhook', 'alchemy', 'scanner']) AND r.chain = $2
  AND r.tx_hash = $3 AND (r.transfer_id = $1 OR r.transfer_id IS NULL)
  AND ($4::uuid IS NULL OR acc.merchant_id IS NOT DISTINCT FROM $4)
ORDER BY r.created_at, r.id;

-- name: list_chain_reports
-- $1 report statuses (text[]), $2 cursor created_at or null, $3 cursor id, $4 page size
-- (+1): reports of every merchant, newest first (an operator's review list)
SELECT r.id, r.source, r.provider_event_id, r.chain, r.tx_hash, r.position, r.log_index,
       r.to_address, r.contract, r.units, r.account_id, r.amount, acc.asset, s.scale,
       r.status, r.transfer_id, r.reason, r.checks, r.next_check_at, r.created_at,
       r.decided_at, m.name AS merchant_name
FROM chain_deposit_reports r
JOIN accounts acc ON acc.id = r.account_id
JOIN assets s ON s.code = acc.asset
LEFT JOIN merchants m ON m.id = acc.merchant_id
WHERE r.status = ANY ($1::text[])
  AND ($2::timestamptz IS NULL OR (r.created_at, r.id) < ($2, $3::bigint))
ORDER BY r.created_at DESC, r.id DESC
LIMIT $4;

-- name: list_payouts
-- $1 scope merchant id or null, $2 statuses (text[]) or null (all), $3 cursor created_at
-- or null, $4 cursor id, $5 page size (+1). `latest_tx` is the newest signed attempt.
SELECT p.id, p.account_id, p.asset, s.scale, p.chain, p.to_address, p.amount, p.fee_hold,
       p.fee_paid, p.status, p.hot_wallet, p.nonce, p.landed_tx_hash, p.wait_reason,
       p.stall, p.created_at, p.updated_at, p.finalized_at, m.name AS merchant_name,
       t.tx_hash AS latest_tx, COALESCE(t.attempt, 0) AS attempts
FROM payouts p
JOIN accounts acc ON acc.id = p.account_id
JOIN assets s ON s.code = p.asset
LEFT JOIN merchants m ON m.id = acc.merchant_id
LEFT JOIN LATERAL (
    SELECT x.tx_hash, x.attempt FROM payout_txs x
    WHERE x.payout_id = p.id ORDER BY x.attempt DESC LIMIT 1
) t ON true
WHERE ($1::uuid IS NULL OR acc.merchant_id = $1)
  AND ($2::text[] IS NULL OR p.status = ANY ($2))
  AND ($3::timestamptz IS NULL OR (p.created_at, p.id) < ($3, $4::uuid))
ORDER BY p.created_at DESC, p.id DESC
LIMIT $5;

-- name: get_payout
-- $1 payout id, $2 scope merchant id or null (the scope as in get_account)
SELECT p.id, p.account_id, p.asset, s.scale, p.chain, p.to_address, p.contract,
       p.decimals, p.amount, p.fee_hold, p.fee_paid, p.status, p.hot_wallet, p.nonce,
       p.landed_tx_hash, p.receipt_status, p.block_number, p.block_hash, p.wait_reason,
       p.failure, p.trace_id, p.created_at, p.updated_at, p.signed_at, p.sent_at,
       p.finalized_at, p.stall, p.stall_detail, p.stalled_at, m.name AS merchant_name
FROM payouts p
JOIN accounts acc ON acc.id = p.account_id
JOIN assets s ON s.code = p.asset
LEFT JOIN merchants m ON m.id = acc.merchant_id
WHERE p.id = $1 AND ($2::uuid IS NULL OR acc.merchant_id IS NOT DISTINCT FROM $2);

-- name: payout_attempts
-- $1 payout id: its signed transactions (attempt 1, then fee bumps), without the raw bytes
SELECT attempt, hot_wallet, nonce, tx_hash, gas_limit, max_fee_per_gas,
       max_priority_fee_per_gas, created_at, broadcast_at
FROM payout_txs WHERE payout_id = $1 ORDER BY attempt;

-- name: payout_operator_actions
-- $1 payout id: the operator actions on it (void, resign), oldest first
SELECT id, action, actor, reason, old_nonce, new_nonce, created_at
FROM payout_actions WHERE payout_id = $1 ORDER BY id;

-- name: events_with_posting
-- $1 event ids (text[]): those that exist, with the time their ledger entry was written
SELECT e.event_id, e.event_type, e.amount, e.status, e.created_at,
       (SELECT min(b.created_at) FROM balance_events b WHERE b.source_event_id = e.event_id)
           AS posted_at
FROM payment_events e WHERE e.event_id = ANY ($1::text[]) ORDER BY e.created_at;

-- name: hot_wallet_rows
-- (no parameters) every hot wallet with its next nonce and its signed or sent payouts
SELECT w.chain, w.address, w.next_nonce, w.created_at, w.updated_at,
       count(p.id) AS pending, min(p.nonce) AS lowest_pending_nonce,
       max(p.nonce) AS highest_pending_nonce
FROM hot_wallets w
LEFT JOIN payouts p ON p.chain = w.chain AND p.hot_wallet = w.address
                   AND p.status IN ('signed', 'sent')
GROUP BY w.chain, w.address, w.next_nonce, w.created_at, w.updated_at
ORDER BY w.chain, w.address;

-- name: hot_wallet_commitments
-- (no parameters) per wallet and asset, what its signed, not yet mined payouts will take:
-- the amounts, and the gas at most (latest attempt's gas limit x max fee, in wei)
SELECT p.chain, p.hot_wallet, p.asset, s.scale, ch.native_decimals, count(*) AS payouts,
       sum(p.amount) AS amount, sum(t.gas_limit * t.max_fee_per_gas) AS max_gas_wei
FROM payouts p
JOIN assets s ON s.code = p.asset
JOIN chains ch ON ch.chain = p.chain
JOIN LATERAL (
    SELECT x.gas_limit, x.max_fee_per_gas FROM payout_txs x
    WHERE x.payout_id = p.id ORDER BY x.attempt DESC LIMIT 1
) t ON true
WHERE p.status IN ('signed', 'sent') AND p.landed_tx_hash IS NULL
GROUP BY p.chain, p.hot_wallet, p.asset, s.scale, ch.native_decimals
ORDER BY p.chain, p.hot_wallet, p.asset;

-- name: stuck_payout_txs
-- $1 seconds: signed or sent payouts (every chain) whose latest attempt is older than that
-- with no receipt recorded, lowest nonce first
SELECT p.id, p.chain, p.hot_wallet, p.nonce, p.status, t.tx_hash, t.attempt,
       t.max_fee_per_gas, t.created_at
FROM payouts p
JOIN LATERAL (
    SELECT x.tx_hash, x.attempt, x.max_fee_per_gas, x.created_at FROM payout_txs x
    WHERE x.payout_id = p.id ORDER BY x.attempt DESC LIMIT 1
) t ON true
WHERE p.status IN ('signed', 'sent') AND p.landed_tx_hash IS NULL
  AND t.created_at < now() - make_interval(secs => $1)
ORDER BY p.chain, p.hot_wallet, p.nonce;

-- name: waiting_payouts
-- (no parameters) held payouts that wait (every chain), with why, oldest first
SELECT p.id, p.chain, p.asset, s.scale, p.amount, p.wait_reason, p.created_at, p.updated_at
FROM payouts p JOIN assets s ON s.code = p.asset
WHERE p.status = 'held' AND p.wait_reason IS NOT NULL
ORDER BY p.created_at
LIMIT 200;
