-- name: place_hold
-- $1 account id, $2 hold (amount + fee at its maximum). One guarded statement under the
-- account's row lock: the hold is placed only if it fits the available balance.
-- The SECURITY DEFINER function of migration 0032: the service role cannot write `held`.
SELECT balance, held FROM ledger_place_hold($1, $2);

-- name: release_hold
-- $1 payout id, final (confirmed or failed) in the caller's transaction: its whole hold
-- (amount + fee hold) is released by the SECURITY DEFINER function of migration 0032
SELECT ledger_release_payout_hold($1);

-- name: account_state
-- $1 account id
SELECT status, balance, held FROM accounts WHERE id = $1;

-- name: payout_asset
-- $1 chain, $2 asset: the native asset (contract NULL) or the registered token(s)
SELECT NULL::text AS contract, native_decimals AS decimals FROM chains
WHERE chain = $1 AND native_asset = $2
UNION ALL
SELECT contract, decimals FROM chain_tokens WHERE chain = $1 AND asset = $2;

-- name: insert_payout
-- $1 merchant, $2 idempotency key, $3 account, $4 asset, $5 chain, $6 to address,
-- $7 contract, $8 decimals, $9 amount, $10 fee hold, $11 trace id
INSERT INTO payouts (merchant_id, idempotency_key, account_id, asset, chain, to_address,
                     contract, decimals, amount, fee_hold, trace_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT ON CONSTRAINT payouts_idempotency_unique DO NOTHING
RETURNING *;

-- name: payout_by_key
-- $1 merchant, $2 idempotency key
SELECT * FROM payouts WHERE merchant_id = $1 AND idempotency_key = $2;

-- name: get_payout
-- $1 payout id
SELECT * FROM payouts WHERE id = $1;

-- name: get_payout_scoped
-- $1 payout id, $2 merchant id, $3 caller is admin
SELECT * FROM payouts WHERE id = $1 AND (merchant_id = $2 OR $3::boolean);

-- name: held_payouts
-- $1 chain, $2 limit: payouts waiting for a nonce, oldest first, with their account's status
SELECT p.*, a.status AS account_status
FROM payouts p JOIN accounts a ON a.id = p.account_id
WHERE p.status = 'held' AND p.chain = $1 ORDER BY p.created_at LIMIT $2;

-- name: open_payouts
-- $1 chain, $2 limit: signed or sent payouts, oldest first, with the age in seconds of
-- their latest transaction on the DATABASE's clock (one clock: never the application's)
SELECT p.*, extract(epoch FROM now() - t.created_at)::float8 AS latest_age_s
FROM payouts p
JOIN LATERAL (
    SELECT created_at FROM payout_txs x WHERE x.payout_id = p.id ORDER BY attempt DESC LIMIT 1
) t ON true
WHERE p.status IN ('signed', 'sent') AND p.chain = $1
ORDER BY p.created_at LIMIT $2;

-- name: lock_held_payout
-- $1 payout id: the held payout, locked (nothing if another signer has it or it moved).
-- A payout's state is tested by the states it is NOT in (the same rows under
-- payouts_status_valid), here and in every compare-and-set by id below: a literal 'held',
-- 'signed' or IN ('signed', 'sent') would let the planner prove the partial index
-- payouts_open applies and find the payout by walking every open payout instead of
-- payouts_pkey.
SELECT * FROM payouts
WHERE id = $1 AND status NOT IN ('signed', 'sent', 'confirmed', 'failed')
FOR UPDATE SKIP LOCKED;

-- name: ensure_hot_wallet
-- $1 chain, $2 address, $3 the chain's transaction count for it (first use only)
INSERT INTO hot_wallets (chain, address, next_nonce) VALUES ($1, $2, $3)
ON CONFLICT ON CONSTRAINT hot_wallets_pkey DO NOTHING;

-- name: allocate_nonce
-- $1 chain, $2 address, $3 the chain's mined transaction count for it (a floor: nonces
-- another signer already consumed are skipped): the next nonce, under the row's lock
UPDATE hot_wallets SET next_nonce = GREATEST(next_nonce, $3) + 1, updated_at = now()
WHERE chain = $1 AND address = $2
RETURNING next_nonce - 1;

-- name: mark_signed
-- $1 payout id, $2 hot wallet, $3 nonce. Held: see lock_held_payout.
UPDATE payouts SET status = 'signed', hot_wallet = $2, nonce = $3, signed_at = now(),
                   wait_reason = NULL, updated_at = now()
WHERE id = $1 AND status NOT IN ('signed', 'sent', 'confirmed', 'failed')
RETURNING id;

-- name: insert_payout_tx
-- $1 payout, $2 attempt, $3 chain, $4 wallet, $5 nonce, $6 hash, $7 raw, $8 gas limit,
-- $9 max fee per gas, $10 max priority fee per gas (wei)
INSERT INTO payout_txs (payout_id, attempt, chain, hot_wallet, nonce, tx_hash, raw_tx,
                        gas_limit, max_fee_per_gas, max_priority_fee_per_gas)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10);

-- name: payout_txs
-- $1 payout id: its signed transactions, first attempt first
SELECT * FROM payout_txs WHERE payout_id = $1 ORDER BY attempt;

-- name: mark_broadcast
-- $1 tx hash: the node accepted it (the first time is kept)
UPDATE payout_txs SET broadcast_at = COALESCE(broadcast_at, now()) WHERE tx_hash = $1;

-- name: mark_sent
-- $1 payout id: compare-and-set signed -> sent (signed: see lock_held_payout)
UPDATE payouts SET status = 'sent', sent_at = now(), updated_at = now()
WHERE id = $1 AND status NOT IN ('held', 'sent', 'confirmed', 'failed')
RETURNING *;

-- name: set_wait_reason
-- $1 payout id, $2 why it waits (NULL: it no longer waits); held: see lock_held_payout
UPDATE payouts SET wait_reason = $2, updated_at = now()
WHERE id = $1 AND status NOT IN ('signed', 'sent', 'confirmed', 'failed')
  AND wait_reason IS DISTINCT FROM $2;

-- name: record_landed
-- $1 payout id, $2 tx hash, $3 receipt status, $4 block number, $5 block hash; signed or
-- sent: see lock_held_payout
UPDATE payouts SET landed_tx_hash = $2, receipt_status = $3, block_number = $4,
                   block_hash = $5, updated_at = now()
WHERE id = $1 AND status NOT IN ('held', 'confirmed', 'failed')
  AND (landed_tx_hash, block_hash) IS DISTINCT FROM ($2, $5);

-- name: clear_landed
-- $1 payout id: its landed transaction left the chain (a reorg); signed or sent: see
-- lock_held_payout
UPDATE payouts SET landed_tx_hash = NULL, receipt_status = NULL, block_number = NULL,
                   block_hash = NULL, updated_at = now()
WHERE id = $1 AND status NOT IN ('held', 'confirmed', 'failed') AND landed_tx_hash IS NOT NULL;

-- name: finalize_payout
-- $1 payout id, $2 target (confirmed|failed), $3 landed hash, $4 receipt status,
-- $5 block number, $6 block hash, $7 fee paid, $8 failure; signed or sent: see
-- lock_held_payout
UPDATE payouts SET status = $2, landed_tx_hash = $3, receipt_status = $4, block_number = $5,
                   block_hash = $6, fee_paid = $7, failure = $8, finalized_at = now(),
                   stall = NULL, stall_detail = NULL, stalled_at = NULL, updated_at = now()
WHERE id = $1 AND status NOT IN ('held', 'confirmed', 'failed')
RETURNING *;

-- name: in_flight
-- $1 chain, $2 wallet: what its signed, not yet mined payouts will still take
SELECT p.contract, p.amount, p.decimals, t.gas_limit, t.max_fee_per_gas
FROM payouts p
JOIN LATERAL (
    SELECT gas_limit, max_fee_per_gas FROM payout_txs x
    WHERE x.payout_id = p.id ORDER BY attempt DESC LIMIT 1
) t ON true
WHERE p.chain = $1 AND p.hot_wallet = $2 AND p.status IN ('signed', 'sent')
  AND p.landed_tx_hash IS NULL;

-- name: wallet_rows
-- $1 chain: every hot wallet with its pending payouts
SELECT w.address, w.next_nonce,
       count(p.id) FILTER (WHERE p.status IN ('signed', 'sent')) AS pending,
       min(p.nonce) FILTER (WHERE p.status IN ('signed', 'sent')) AS lowest_pending_nonce
FROM hot_wallets w
LEFT JOIN payouts p ON p.chain = w.chain AND p.hot_wallet = w.address
WHERE w.chain = $1
GROUP BY w.address, w.next_nonce
ORDER BY w.address;

-- name: stuck_txs
-- $1 chain, $2 seconds: pending payouts whose latest transaction is older than that
SELECT p.id, p.hot_wallet, p.nonce, p.status, t.tx_hash, t.attempt, t.max_fee_per_gas,
       t.created_at
FROM payouts p
JOIN LATERAL (
    SELECT tx_hash, attempt, max_fee_per_gas, created_at FROM payout_txs x
    WHERE x.payout_id = p.id ORDER BY attempt DESC LIMIT 1
) t ON true
WHERE p.chain = $1 AND p.status IN ('signed', 'sent') AND p.landed_tx_hash IS NULL
  AND t.created_at < now() - make_interval(secs => $2)
ORDER BY p.nonce;

-- name: waiting_payouts
-- $1 chain: held payouts that wait, with why
SELECT id, asset, amount, wait_reason, created_at FROM payouts
WHERE chain = $1 AND status = 'held' AND wait_reason IS NOT NULL ORDER BY created_at;

-- name: lock_open_payout
-- $1 payout id: a signed or sent payout (see lock_held_payout), locked for a fee bump
SELECT * FROM payouts WHERE id = $1 AND status NOT IN ('held', 'confirmed', 'failed')
FOR UPDATE;

-- name: next_attempt
-- $1 payout id
SELECT COALESCE(max(attempt), 0) + 1 FROM payout_txs WHERE payout_id = $1;

-- name: count_open
-- $1 chain: payouts not final yet
SELECT count(*) FROM payouts WHERE chain = $1 AND status IN ('held', 'signed', 'sent');

-- name: mark_stall
-- $1 payout id, $2 stall (unaccepted|unmined|nonce_taken), $3 detail. `stalled_at` keeps
-- the first time this stall was seen. Signed or sent: see lock_held_payout.
UPDATE payouts SET stall = $2, stall_detail = $3,
                   stalled_at = CASE WHEN stall = $2 THEN stalled_at ELSE now() END,
                   updated_at = now()
WHERE id = $1 AND status NOT IN ('held', 'confirmed', 'failed')
  AND (stall, stall_detail) IS DISTINCT FROM ($2, $3);

-- name: clear_stall
-- $1 payout id: it progresses again
UPDATE payouts SET stall = NULL, stall_detail = NULL, stalled_at = NULL, updated_at = now()
WHERE id = $1 AND stall IS NOT NULL;

-- name: stalled_payouts
-- $1 chain (NULL: every chain), $2 seconds: open payouts that do not progress: marked
-- stalled by the engine, or whose latest transaction is older than $2 s and not mined
-- (the engine may not be running). Ages on the database's clock.
SELECT p.id, p.chain, p.hot_wallet, p.nonce, p.status, p.stall, p.stall_detail,
       extract(epoch FROM now() - COALESCE(p.stalled_at, t.created_at))::float8 AS for_s
FROM payouts p
JOIN LATERAL (
    SELECT created_at FROM payout_txs x WHERE x.payout_id = p.id ORDER BY attempt DESC LIMIT 1
) t ON true
WHERE p.status IN ('signed', 'sent') AND ($1::text IS NULL OR p.chain = $1)
  AND (p.stall IS NOT NULL
       OR (p.landed_tx_hash IS NULL AND t.created_at < now() - make_interval(secs => $2)))
ORDER BY p.created_at;

-- name: known_sink
-- $1 address (lower case): what payflow knows it as when money sent there would be lost
-- or never leave (a token contract, a hot wallet, a deposit address); no row otherwise
SELECT 'a registered token contract' AS what FROM chain_tokens WHERE contract = $1
UNION ALL
SELECT 'a payflow hot wallet' FROM hot_wallets WHERE address = $1
UNION ALL
SELECT 'a payflow deposit address' FROM deposit_addresses WHERE address = $1
LIMIT 1;

-- name: lock_payout
-- $1 payout id: any payout, locked (operator actions)
SELECT * FROM payouts WHERE id = $1 FOR UPDATE;

-- name: void_payout
-- $1 payout id, $2 failure text: an open payout none of whose transactions was mined,
-- voided by an operator (nothing spent: fee_paid 0). Signed or sent: see lock_held_payout.
UPDATE payouts SET status = 'failed', failure = $2, fee_paid = 0, finalized_at = now(),
                   landed_tx_hash = NULL, receipt_status = NULL, block_number = NULL,
                   block_hash = NULL, stall = NULL, stall_detail = NULL, stalled_at = NULL,
                   updated_at = now()
WHERE id = $1 AND status NOT IN ('held', 'confirmed', 'failed')
RETURNING *;

-- name: resign_payout
-- $1 payout id, $2 hot wallet, $3 nonce: an open payout re-signed by an operator (its
-- new transaction is stored in payout_txs first); back to signed until a node accepts it
UPDATE payouts SET status = 'signed', hot_wallet = $2, nonce = $3, signed_at = now(),
                   landed_tx_hash = NULL, receipt_status = NULL, block_number = NULL,
                   block_hash = NULL, stall = NULL, stall_detail = NULL, stalled_at = NULL,
                   updated_at = now()
WHERE id = $1 AND status NOT IN ('held', 'confirmed', 'failed')
RETURNING *;

-- name: insert_payout_action
-- $1 payout id, $2 action (void|resign), $3 actor, $4 reason, $5 old nonce, $6 new nonce,
-- $7 what the chain showed (jsonb text)
INSERT INTO payout_actions (payout_id, action, actor, reason, old_nonce, new_nonce,
                            chain_evidence)
VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)
RETURNING id, created_at;

-- name: give_back_nonce
-- $1 chain, $2 address, $3 nonce: the wallet's last allocated nonce returns to the pool
-- (a voided payout whose nonce was never used, when no later nonce was allocated)
UPDATE hot_wallets SET next_nonce = $3, updated_at = now()
WHERE chain = $1 AND address = $2 AND next_nonce = $3 + 1
RETURNING next_nonce;

-- name: raise_fee_hold
-- $1 payout id, $2 added fee hold (the account's asset; the account's hold was raised by
-- the same amount in the same transaction, `place_hold`): an operator's raise of an open
-- payout's fee ceiling. Signed or sent: see lock_held_payout.
UPDATE payouts SET fee_hold = fee_hold + $2, updated_at = now()
WHERE id = $1 AND status IN ('signed', 'sent')
RETURNING fee_hold;

-- name: payout_event_facts
-- $1 account id: the merchant owning a payout's account (NULL: none) and its asset's scale
SELECT a.merchant_id, s.scale FROM accounts a JOIN assets s ON s.code = a.asset
WHERE a.id = $1;
