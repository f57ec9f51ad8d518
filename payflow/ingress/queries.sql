-- name: resolve_address
-- $1 chain, $2 normalised address: the account behind a deposit address, with its asset
SELECT d.account_id, a.asset
FROM deposit_addresses d JOIN accounts a ON a.id = d.account_id
WHERE d.chain = $1 AND d.address = $2;

-- name: insert_unmatched
-- $1 event id, $2 reason, $3 chain, $4 address, $5 asset, $6 amount text, $7 tx hash,
-- $8 payload, $9 trace id
INSERT INTO unmatched_provider_events
    (event_id, reason, chain, address, asset, amount, tx_hash, payload, trace_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (event_id) DO NOTHING;

-- name: assign_address
-- $1 chain, $2 normalised address, $3 account id
INSERT INTO deposit_addresses (chain, address, account_id) VALUES ($1, $2, $3)
RETURNING chain, address, account_id;

-- name: list_unmatched
-- $1 cursor (created_at, event_id) or nulls, $2 event id cursor, $3 page size
SELECT event_id, reason, chain, address, asset, amount, tx_hash, trace_id, created_at
FROM unmatched_provider_events
WHERE reviewed_at IS NULL
  AND ($1::timestamptz IS NULL OR (created_at, event_id) > ($1, $2::text))
ORDER BY created_at, event_id
LIMIT $3;
