-- name: resolve_address
-- $1 chain, $2 normalised address: the account behind a deposit address, with its asset
SELECT d.account_id, a.asset
FROM deposit_addresses d JOIN accounts a ON a.id = d.account_id
WHERE d.chain = $1 AND d.address = $2;

-- name: insert_unmatched
-- $1 event id, $2 reason, $3 chain, $4 address, $5 asset, $6 amount text, $7 tx hash,
-- $8 payload (NUL-free copy; a JSON null activity is stored as JSON null), $9 trace id,
-- $10 delivery body SHA-256, $11 position in the delivery, $12 detail.
-- Returns the id when inserted; nothing when the id is already kept.
INSERT INTO unmatched_provider_events
    (event_id, reason, chain, address, asset, amount, tx_hash, payload, trace_id,
     delivery_sha256, position, detail)
VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8, 'null'::jsonb), $9, $10, $11, $12)
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id;

-- name: unmatched_payload
-- $1 event id: the payload an unmatched row holds, to tell a redelivery from a reuse
SELECT payload FROM unmatched_provider_events WHERE event_id = $1;

-- name: assign_address
-- $1 chain, $2 normalised address, $3 account id
INSERT INTO deposit_addresses (chain, address, account_id) VALUES ($1, $2, $3)
RETURNING chain, address, account_id;

-- name: list_unmatched
-- $1 cursor (created_at, event_id) or nulls, $2 event id cursor, $3 page size
SELECT event_id, reason, chain, address, asset, amount, tx_hash, trace_id, created_at,
       detail, position
FROM unmatched_provider_events
WHERE reviewed_at IS NULL
  AND ($1::timestamptz IS NULL OR (created_at, event_id) > ($1, $2::text))
ORDER BY created_at, event_id
LIMIT $3;

-- name: chain_native
-- $1 chain: its native asset code and decimals
SELECT native_asset, native_decimals FROM chains WHERE chain = $1;

-- name: token_lookup
-- $1 chain, $2 lower-case contract address: the registered asset and on-chain decimals
SELECT asset, decimals FROM chain_tokens WHERE chain = $1 AND contract = $2;

-- name: keep_delivery
-- $1 SHA-256 of the body, $2 the exact body bytes (stored once per body)
INSERT INTO provider_deliveries (body_sha256, body) VALUES ($1, $2)
ON CONFLICT (body_sha256) DO NOTHING;

-- name: add_chain
-- $1 chain, $2 native asset code, $3 native decimals, $4 EIP-155 chain id or null: the
-- stored row (existing or new), with its recorded chain id
WITH added AS (
    INSERT INTO chains (chain, native_asset, native_decimals, chain_id) VALUES ($1, $2, $3, $4)
    ON CONFLICT (chain) DO NOTHING
    RETURNING chain, native_asset, native_decimals, chain_id, true AS created
)
SELECT * FROM added
UNION ALL
SELECT chain, native_asset, native_decimals, chain_id, false FROM chains WHERE chain = $1
LIMIT 1;

-- name: record_chain_id
-- $1 chain, $2 EIP-155 chain id: recorded on a chain registered without one (never
-- changed once recorded: another id is a conflict). Returns the chain when recorded.
UPDATE chains SET chain_id = $2 WHERE chain = $1 AND chain_id IS NULL RETURNING chain;

-- name: add_token
-- $1 chain, $2 lower-case contract, $3 asset code, $4 decimals: the stored row
WITH added AS (
    INSERT INTO chain_tokens (chain, contract, asset, decimals) VALUES ($1, $2, $3, $4)
    ON CONFLICT (chain, contract) DO NOTHING
    RETURNING chain, contract, asset, decimals, true AS created
)
SELECT * FROM added
UNION ALL
SELECT chain, contract, asset, decimals, false FROM chain_tokens
WHERE chain = $1 AND contract = $2
LIMIT 1;

-- name: list_tokens
-- $1 chain or null for all: native assets (contract null) and tokens, by chain
SELECT chain, NULL::text AS contract, native_asset AS asset, native_decimals AS decimals
FROM chains WHERE $1::text IS NULL OR chain = $1
UNION ALL
SELECT chain, contract, asset, decimals
FROM chain_tokens WHERE $1::text IS NULL OR chain = $1
ORDER BY chain, contract NULLS FIRST;

-- name: delivery_of_unmatched
-- $1 unmatched event id: the exact bytes of the delivery it came in (null when the row
-- predates migration 0005 and holds no delivery)
SELECT d.body
FROM unmatched_provider_events u JOIN provider_deliveries d ON d.body_sha256 = u.delivery_sha256
WHERE u.event_id = $1;
