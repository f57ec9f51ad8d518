-- name: allocate_index
-- $1 chain: the next child index of the deposit xpub for this chain (row lock held
-- until commit, so concurrent requests serialise and get distinct indexes)
INSERT INTO deposit_address_counters AS c (chain, next_index) VALUES ($1, 1)
ON CONFLICT (chain) DO UPDATE SET next_index = c.next_index + 1
RETURNING next_index - 1 AS index;

-- name: insert_derived_address
-- $1 chain, $2 lower-case address, $3 account id, $4 derivation index, $5 the merchant
-- whose Idempotency-Key derived it, $6 that key (both NULL: no key)
INSERT INTO deposit_addresses (chain, address, account_id, derivation_index, derived_by,
                               derive_key)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING chain, address, account_id, derivation_index;

-- name: derived_by_key
-- $1 merchant, $2 Idempotency-Key: the address that key derived, if any
SELECT chain, address, account_id, derivation_index
FROM deposit_addresses
WHERE derived_by = $1 AND derive_key = $2;

-- name: get_cursor
-- $1 chain: where the scanner stands (the last walked block), if anywhere
SELECT block_number, block_hash FROM chain_scanner_cursors WHERE chain = $1;

-- name: init_cursor
-- $1 chain, $2 block number, $3 block hash: the first cursor (nothing when one exists)
INSERT INTO chain_scanner_cursors (chain, block_number, block_hash) VALUES ($1, $2, $3)
ON CONFLICT (chain) DO NOTHING;

-- name: move_cursor
-- $1 chain, $2 expected number, $3 expected hash, $4 new number, $5 new hash,
-- $6 reorgs to add. Compare-and-set: moves only from where the walk started.
UPDATE chain_scanner_cursors
SET block_number = $4, block_hash = $5, reorgs = reorgs + $6, updated_at = now()
WHERE chain = $1 AND block_number = $2 AND block_hash = $3
RETURNING block_number;

-- name: insert_blocks
-- $1 chain, $2 numbers, $3 hashes, $4 parent hashes (arrays of one length): walked blocks
INSERT INTO chain_scanner_blocks (chain, block_number, block_hash, parent_hash)
SELECT $1, n, h, p FROM unnest($2::bigint[], $3::text[], $4::text[]) AS t(n, h, p)
ON CONFLICT (chain, block_number) DO UPDATE
SET block_hash = EXCLUDED.block_hash, parent_hash = EXCLUDED.parent_hash;

-- name: recent_blocks
-- $1 chain, $2 lowest number, $3 highest number: walked block hashes, newest first
SELECT block_number, block_hash FROM chain_scanner_blocks
WHERE chain = $1 AND block_number BETWEEN $2 AND $3
ORDER BY block_number DESC;

-- name: drop_blocks_above
-- $1 chain, $2 fork point: forget the hashes of blocks a reorg replaced
DELETE FROM chain_scanner_blocks WHERE chain = $1 AND block_number > $2;

-- name: prune_blocks
-- $1 chain, $2 keep from this number on
DELETE FROM chain_scanner_blocks WHERE chain = $1 AND block_number < $2;

-- name: watched_addresses
-- $1 chain: every deposit address on the chain (lower case)
SELECT address FROM deposit_addresses WHERE chain = $1;

-- name: watched_tokens
-- $1 chain: the registered token contracts (lower case)
SELECT contract FROM chain_tokens WHERE chain = $1;

-- name: chain_carries_asset
-- $1 chain, $2 asset: is the asset the chain's native one or a registered token on it?
-- NULL when the chain is unknown.
SELECT CASE WHEN c.chain IS NULL THEN NULL
            ELSE c.native_asset = $2
                 OR EXISTS (SELECT 1 FROM chain_tokens t WHERE t.chain = $1 AND t.asset = $2)
       END
FROM (SELECT 1) AS one LEFT JOIN chains c ON c.chain = $1;

-- name: watched_count
-- $1 chain: deposit addresses plus registered tokens on the chain (neither is deleted
-- by the service: a grown count means something new to watch)
SELECT (SELECT count(*) FROM deposit_addresses WHERE chain = $1)
     + (SELECT count(*) FROM chain_tokens WHERE chain = $1);
