-- name: get_payment
-- $1 payment id: the payment with its merchant's webhook secret and its currency's scale
SELECT p.id, p.merchant_id, p.amount, p.currency, p.status, p.webhook_url,
       p.webhook_delivered_at, p.webhook_attempts, p.trace_id, p.processed_at, p.created_at,
       m.webhook_secret, a.scale
FROM payments p
JOIN merchants m ON m.id = p.merchant_id
JOIN assets a ON a.code = p.currency
WHERE p.id = $1;

-- name: finalize_payment
-- $1 payment id, $2 terminal status. Compare-and-set: only a pending payment moves.
UPDATE payments SET status = $2, processed_at = clock_timestamp()
WHERE id = $1 AND status = 'pending'
RETURNING id;

-- name: open_merchant_account
-- $1 merchant id, $2 asset. Race-free thanks to accounts_merchant_asset_unique.
INSERT INTO accounts (asset, merchant_id) VALUES ($2, $1)
ON CONFLICT (merchant_id, asset) WHERE merchant_id IS NOT NULL DO NOTHING;

-- name: merchant_account
-- $1 merchant id, $2 asset
SELECT id FROM accounts WHERE merchant_id = $1 AND asset = $2;

-- name: record_webhook_attempt
-- $1 payment id, $2 delivered? Counts the attempt; a delivered time is never overwritten.
UPDATE payments
SET webhook_attempts = webhook_attempts + 1,
    webhook_delivered_at = CASE
        WHEN $2::boolean AND webhook_delivered_at IS NULL THEN clock_timestamp()
        ELSE webhook_delivered_at
    END
WHERE id = $1
RETURNING webhook_attempts, webhook_delivered_at;

-- name: insert_payment
-- $1 merchant id, $2 amount, $3 currency, $4 idempotency key, $5 webhook url, $6 trace id
INSERT INTO payments (merchant_id, amount, currency, idempotency_key, webhook_url, trace_id)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id;

-- name: lock_payment_for_webhook
-- $1 payment id. Held while one worker POSTs, so duplicate deliveries never POST in parallel;
-- a row locked by another sender is skipped (no row returned).
SELECT p.id, p.merchant_id, p.amount, p.currency, p.status, p.webhook_url,
       p.webhook_delivered_at, p.webhook_attempts, p.trace_id, p.processed_at, p.created_at,
       m.webhook_secret, a.scale
FROM payments p
JOIN merchants m ON m.id = p.merchant_id
JOIN assets a ON a.code = p.currency
WHERE p.id = $1
FOR UPDATE OF p SKIP LOCKED;

-- name: payment_exists
-- $1 payment id
SELECT EXISTS (SELECT 1 FROM payments WHERE id = $1);
