-- name: address_account
-- $1 chain, $2 lower-case address: the account behind a deposit address, with its asset
-- and when the address was assigned (the assignment rule, payflow.chain.deposits)
SELECT d.account_id, a.asset, d.created_at AS assigned_at
FROM deposit_addresses d JOIN accounts a ON a.id = d.account_id
WHERE d.chain = $1 AND d.address = $2;

-- name: native_asset
-- $1 chain: its native asset and decimals
SELECT native_asset AS asset, native_decimals AS decimals FROM chains WHERE chain = $1;

-- name: registered_token
-- $1 chain, $2 lower-case contract: the registered asset and decimals
SELECT asset, decimals FROM chain_tokens WHERE chain = $1 AND contract = $2;

-- name: insert_report
-- $1 source, $2 chain, $3 tx hash, $4 position or null, $5 block-level log index or null,
-- $6 claim text, $7 to, $8 contract or null, $9 units, $10 account id, $11 amount,
-- $12 trace id, $13 provider event id or null. Returns the id when new; nothing for a
-- duplicate claim or a provider id already naming another claim.
INSERT INTO chain_deposit_reports
    (source, chain, tx_hash, position, log_index, claim, to_address, contract, units,
     account_id, amount, trace_id, provider_event_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: same_claim
-- $1 source, $2 chain, $3 tx hash, $4 claim: is this exact claim already reported?
SELECT EXISTS (SELECT 1 FROM chain_deposit_reports
               WHERE source = $1 AND chain = $2 AND tx_hash = $3 AND claim = $4);

-- name: recheck_tx
-- $1 chain, $2 tx hash: check its deposits and pending reports again now (a provider
-- said a log was removed). Found through their keys (chain_deposits_identity, and
-- chain_deposit_reports_once through every source its CHECK allows): the states read "not
-- final" (the same rows under the status CHECKs), because the literals 'verified',
-- 'orphaned' or 'pending' would let the planner walk a partial index of every deposit or
-- report in that state (chain_deposits_due, chain_deposit_reports_due) instead.
WITH deposits AS (
    UPDATE chain_deposits SET next_check_at = now()
    WHERE chain = $1 AND tx_hash = $2 AND status NOT IN ('credited', 'reversed')
    RETURNING 1
), reports AS (
    UPDATE chain_deposit_reports SET next_check_at = now()
    WHERE source = ANY (ARRAY['webhook', 'alchemy', 'scanner']) AND chain = $1
      AND tx_hash = $2 AND status NOT IN ('confirmed', 'refuted')
    RETURNING 1
)
SELECT (SELECT count(*) FROM deposits) + (SELECT count(*) FROM reports);

-- name: confirm_report
-- $1 report id, $2 transfer id the node showed. A pending report is one not decided yet,
-- status NOT IN ('confirmed', 'refuted') (the same rows under
-- chain_deposit_reports_status_valid): the literal 'pending' would let the planner walk
-- the partial index chain_deposit_reports_due (every pending report) instead of the key.
-- The same in refute_report and reschedule_report.
UPDATE chain_deposit_reports
SET status = 'confirmed', transfer_id = $2, decided_at = now(), reason = NULL
WHERE id = $1 AND status NOT IN ('confirmed', 'refuted');

-- name: refute_report
-- $1 report id, $2 reason (pending: not decided, see confirm_report)
UPDATE chain_deposit_reports
SET status = 'refuted', reason = $2, decided_at = now()
WHERE id = $1 AND status NOT IN ('confirmed', 'refuted');

-- name: reschedule_report
-- $1 report id, $2 seconds until the next check (pending: not decided, see confirm_report)
UPDATE chain_deposit_reports
SET checks = checks + 1, next_check_at = now() + make_interval(secs => $2)
WHERE id = $1 AND status NOT IN ('confirmed', 'refuted');

-- name: due_reports
-- $1 chains with an RPC, $2 batch size: pending reports whose check is due
SELECT id, source, chain, tx_hash, position, log_index, to_address, contract, units,
       account_id, trace_id, checks, created_at,
       extract(epoch FROM now() - created_at)::float8 AS age_s
FROM chain_deposit_reports
WHERE status = 'pending' AND next_check_at <= now() AND chain = ANY($1::text[])
ORDER BY next_check_at
LIMIT $2;

-- name: upsert_deposit
-- $1 transfer id, $2 chain, $3 tx hash, $4 position, $5 to, $6 contract, $7 units,
-- $8 account id, $9 asset, $10 amount, $11 block number, $12 block hash, $13 source,
-- $14 trace id. A verified or orphaned deposit moves to this block (verified); a
-- credited or reversed one keeps its block. Returns the status after.
INSERT INTO chain_deposits
    (transfer_id, chain, tx_hash, position, to_address, contract, units, account_id, asset,
     amount, block_number, block_hash, sources, trace_id, verified_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, ARRAY[$13::text], $14, now())
ON CONFLICT (transfer_id) DO UPDATE SET
    sources = CASE WHEN $13 = ANY (chain_deposits.sources) THEN chain_deposits.sources
                   ELSE chain_deposits.sources || $13::text END,
    status = CASE WHEN chain_deposits.status IN ('verified', 'orphaned') THEN 'verified'
                  ELSE chain_deposits.status END,
    block_number = CASE WHEN chain_deposits.status IN ('verified', 'orphaned')
                        THEN EXCLUDED.block_number ELSE chain_deposits.block_number END,
    block_hash = CASE WHEN chain_deposits.status IN ('verified', 'orphaned')
                      THEN EXCLUDED.block_hash ELSE chain_deposits.block_hash END,
    next_check_at = CASE WHEN chain_deposits.status IN ('verified', 'orphaned') THEN now()
                         ELSE chain_deposits.next_check_at END,
    updated_at = now()
RETURNING status;

-- name: due_deposits
-- $1 chains with an RPC, $2 batch size, $3 orphan recheck horizon in seconds. Orphaned
-- deposits and credited ones a reorg reversed are watched for re-inclusion alike.
SELECT transfer_id, chain, tx_hash, position, to_address, contract, units, account_id,
       asset, amount, status, block_number, block_hash, checks, trace_id
FROM chain_deposits
WHERE status IN ('verified', 'orphaned', 'reversed') AND next_check_at <= now()
  AND chain = ANY($1::text[])
  AND (status = 'verified' OR updated_at > now() - make_interval(secs => $3))
ORDER BY next_check_at
LIMIT $2;

-- name: reinclude_reversed
-- $1 transfer id, $2 new block number, $3 new block hash: a reversed deposit whose
-- transfer the chain holds again is verified there; its credit event moves to
-- past_credit_events (the next credit gets the next event id). Returns the transfer id.
UPDATE chain_deposits
SET status = 'verified', block_number = $2, block_hash = $3,
    past_credit_events = past_credit_events || credit_event_id, credit_event_id = NULL,
    reversal_event_id = NULL, checks = 0, next_check_at = now(), updated_at = now()
WHERE transfer_id = $1 AND status = (SELECT 'reversed'::text)
RETURNING transfer_id;

-- name: reschedule_deposit
-- $1 transfer id, $2 expected status, $3 seconds until the next check. The status is read
-- through a subquery (an InitPlan): a custom plan would otherwise see the constant
-- ('verified', 'credited'), prove a partial index of that state applies (chain_deposits_due,
-- chain_deposits_credited) and walk it instead of chain_deposits_pkey. So in move_block.
UPDATE chain_deposits
SET checks = checks + 1, next_check_at = now() + make_interval(secs => $3)
WHERE transfer_id = $1 AND status = (SELECT $2::text);

-- name: mark_credited
-- $1 transfer id, $2 credit event id, $3 block hash verified final.
-- Compare-and-set: only a verified deposit still at that block is credited. Verified is
-- written as "none of the other states" (the same rows under chain_deposits_status_valid):
-- the literal 'verified' would let the planner walk a partial index of every verified
-- deposit (chain_deposits_due, chain_deposits_pending) instead of the key. So in
-- mark_orphaned, and for 'credited' (chain_deposits_credited) in mark_reversed and
-- deposit_for_reversal.
-- A deposit credited before and reversed by a reorg (past_credit_events not empty) gets
-- back what the reversal debited: its amount minus the shortfall, which is cleared.
-- (RETURNING sees the new row, so the old shortfall is read through `old`.)
UPDATE chain_deposits AS d
SET status = 'credited', credit_event_id = $2, credited_at = now(), updated_at = now(),
    shortfall = NULL
FROM (SELECT transfer_id, shortfall FROM chain_deposits WHERE transfer_id = $1) AS old
WHERE d.transfer_id = $1 AND old.transfer_id = d.transfer_id
  AND d.status NOT IN ('orphaned', 'credited', 'reversed') AND d.block_hash = $3
RETURNING d.account_id, d.asset, d.trace_id,
    d.amount - CASE WHEN cardinality(d.past_credit_events) > 0 THEN COALESCE(old.shortfall, 0)
                    ELSE 0 END AS amount,
    CASE WHEN cardinality(d.past_credit_events) > 0 THEN COALESCE(old.shortfall, 0)
         ELSE 0 END AS recovered;

-- name: credit_generation
-- $1 transfer id: how many earlier credits a reorg reversed (0 for a first credit)
SELECT cardinality(past_credit_events) FROM chain_deposits WHERE transfer_id = $1;

-- name: mark_orphaned
-- $1 transfer id, $2 seconds until the next check (re-inclusion). Only a verified deposit
-- (written as in mark_credited).
UPDATE chain_deposits
SET status = 'orphaned', checks = 0, updated_at = now(),
    next_check_at = now() + make_interval(secs => $2)
WHERE transfer_id = $1 AND status NOT IN ('orphaned', 'credited', 'reversed');

-- name: move_block
-- $1 transfer id, $2 expected status (through an InitPlan, see reschedule_deposit),
-- $3 new block number, $4 new block hash
UPDATE chain_deposits
SET block_number = $3, block_hash = $4, updated_at = now(), next_check_at = now(),
    status = CASE WHEN status = 'orphaned' THEN 'verified' ELSE status END
WHERE transfer_id = $1 AND status = (SELECT $2::text);

-- name: watched_credits
-- $1 chain, $2 lowest block number still watched, $3 batch size: credited deposits a
-- reorg deeper than the confirmations could still undo
SELECT transfer_id, chain, tx_hash, position, to_address, contract, units, account_id,
       asset, amount, block_number, block_hash, trace_id
FROM chain_deposits
WHERE status = 'credited' AND chain = $1 AND block_number >= $2
ORDER BY block_number
LIMIT $3;

-- name: lock_account
-- $1 account id: its balance and status, locked until commit. `balance` here is what a
-- debit may take: the balance minus open payout holds, which the posting guard
-- keeps whole.
SELECT balance - held AS balance, status FROM accounts WHERE id = $1 FOR UPDATE;

-- name: mark_reversed
-- $1 transfer id, $2 reversal event id or null, $3 shortfall or null. Only a credited
-- deposit (written as in mark_credited).
UPDATE chain_deposits
SET status = 'reversed', reversal_event_id = $2, shortfall = $3, updated_at = now()
WHERE transfer_id = $1 AND status NOT IN ('verified', 'orphaned', 'reversed')
RETURNING amount;

-- name: set_shortfall
-- $1 transfer id, $2 shortfall
UPDATE chain_deposits SET shortfall = $2, updated_at = now()
WHERE transfer_id = $1 AND status = 'reversed';

-- name: pending_incoming
-- $1 account id: verified deposits not credited, plus pending reports not yet linked
-- to a deposit (one per claimed transfer and position or log-index hint)
SELECT COALESCE((SELECT sum(amount) FROM chain_deposits
                 WHERE account_id = $1 AND status = 'verified'), 0)
     + COALESCE((SELECT sum(amount) FROM (
           SELECT DISTINCT ON (r.chain, r.tx_hash, r.to_address, r.contract, r.units,
                               COALESCE(r.position, r.log_index)) r.amount
           FROM chain_deposit_reports r
           WHERE r.account_id = $1 AND r.status = 'pending'
             AND NOT EXISTS (
                 SELECT 1 FROM chain_deposits d
                 WHERE d.chain = r.chain AND d.tx_hash = r.tx_hash
                   AND d.to_address = r.to_address AND d.units = r.units
                   AND d.contract IS NOT DISTINCT FROM r.contract)
       ) AS claimed), 0);

-- name: our_addresses
-- $1 chain: every deposit address on it
SELECT address FROM deposit_addresses WHERE chain = $1 ORDER BY address;

-- name: chain_tokens
-- $1 chain: registered token contracts
SELECT contract FROM chain_tokens WHERE chain = $1 ORDER BY contract;

-- name: credited_in_range
-- $1 chain, $2 first block, $3 last block: credited deposits the range should show
SELECT transfer_id, tx_hash, position, to_address, contract, units, block_number,
       block_hash, credit_event_id
FROM chain_deposits
WHERE chain = $1 AND status = 'credited' AND block_number BETWEEN $2 AND $3;

-- name: credited_ids
-- $1 transfer ids: those credited now (a reversed deposit is NOT: its credit was taken
-- back, so a final transfer behind it is uncredited). The ids are looked up by their key
-- first (OFFSET 0 keeps the planner from answering through the partial index of all
-- credited deposits, a scan that grows with the table), then judged by status.
SELECT transfer_id FROM (
    SELECT transfer_id, status FROM chain_deposits
    WHERE transfer_id = ANY($1::text[]) OFFSET 0
) AS asked
WHERE status = 'credited';

-- name: deposit_for_reversal
-- $1 transfer id: a credited deposit's account, asset, amount and trace (null otherwise);
-- credited written as in mark_credited
SELECT account_id, asset, amount, trace_id,
       cardinality(past_credit_events) AS generation FROM chain_deposits
WHERE transfer_id = $1 AND status NOT IN ('verified', 'orphaned', 'reversed');

-- name: deposit_events_without_credit
-- $1 event id prefix `chain:<chain>:`: confirmed deposit events of the chain that no
-- deposit accounts for: neither its current credit (credited, or reversed with its
-- compensating debit) nor an earlier credit a reorg reversed (past_credit_events)
SELECT e.event_id FROM payment_events e
WHERE starts_with(e.event_id, $1) AND e.event_type = 'deposit' AND e.status = 'confirmed'
  AND NOT EXISTS (SELECT 1 FROM chain_deposits d
                  WHERE d.credit_event_id = e.event_id AND d.status IN ('credited', 'reversed'))
  AND NOT EXISTS (SELECT 1 FROM chain_deposits d
                  WHERE d.transfer_id = split_part(substr(e.event_id, 7), '~', 1)
                    AND e.event_id = ANY (d.past_credit_events))
ORDER BY e.event_id;

-- name: custody_assets
-- $1 chain: the assets payflow holds on it, native (contract NULL) first, then tokens
SELECT native_asset AS asset, NULL::text AS contract, native_decimals AS decimals
FROM chains WHERE chain = $1
UNION ALL
SELECT asset, contract, decimals FROM (
    SELECT asset, contract, decimals FROM chain_tokens WHERE chain = $1 ORDER BY contract
) t;

-- name: custody_holders
-- $1 chain: every address whose holdings the custody account books (deposit addresses
-- and hot wallets)
SELECT address, 'deposit' AS role FROM deposit_addresses WHERE chain = $1
UNION
SELECT address, 'hot_wallet' AS role FROM hot_wallets WHERE chain = $1
ORDER BY address;

-- name: custody_book_balance
-- $1 system account code: its balance on the debit side, summed from the journal
SELECT coalesce(-sum(amount), 0) FROM ledger_legs WHERE ledger_account = $1;

-- name: custody_booked_payout_gas
-- $1 network_fees account code: the gas booked there for payouts (every leg but the
-- sweep_gas transfers the custody recon books itself), debit side
SELECT coalesce(-sum(l.amount), 0) FROM ledger_legs l
LEFT JOIN ledger_transfers t ON t.id = l.transfer_id
WHERE l.ledger_account = $1 AND (t.kind IS NULL OR t.kind <> 'sweep_gas');

-- name: custody_deposits_in_flight
-- $1 chain, $2 final height: per asset, deposits the chain holds at a final block that
-- the books have not credited yet (verified, not credited), and credits whose block is
-- above the final height (booked, not yet in the chain's final state)
SELECT asset,
       coalesce(sum(amount) FILTER (WHERE status = 'verified' AND block_number <= $2), 0)
           - coalesce(sum(amount) FILTER (WHERE status = 'credited' AND block_number > $2), 0)
           AS amount,
       array_agg(transfer_id ORDER BY transfer_id)
           FILTER (WHERE (status = 'verified' AND block_number <= $2)
                      OR (status = 'credited' AND block_number > $2)) AS transfers
FROM chain_deposits WHERE chain = $1 GROUP BY asset;

-- name: custody_reversed_deposits
-- $1 chain: deposits reversed by a reorg (their tx may be final on chain again)
SELECT transfer_id, tx_hash, asset, amount FROM chain_deposits
WHERE chain = $1 AND status = 'reversed' ORDER BY transfer_id LIMIT 200;

-- name: custody_payouts
-- $1 chain: payouts with a transaction (their gas was paid by a hot wallet), with every
-- transaction hash they signed
SELECT p.id, p.asset, p.contract, p.amount, p.status, p.hot_wallet, p.landed_tx_hash,
       array_agg(t.tx_hash ORDER BY t.attempt) AS tx_hashes
FROM payouts p JOIN payout_txs t ON t.payout_id = p.id
WHERE p.chain = $1 AND p.status <> 'held'
GROUP BY p.id ORDER BY p.created_at;

-- name: treasury_active
-- $1 chain: the registered treasury addresses
SELECT address FROM treasury_addresses WHERE chain = $1 AND removed_at IS NULL ORDER BY address;

-- name: treasury_list
SELECT id, chain, address, added_by, added_at, removed_by, removed_at
FROM treasury_addresses ORDER BY chain, added_at, id;

-- name: treasury_add
-- $1 chain, $2 address, $3 who: NULL when the address is already registered
INSERT INTO treasury_addresses (chain, address, added_by) VALUES ($1, $2, $3)
ON CONFLICT (chain, address) WHERE removed_at IS NULL DO NOTHING
RETURNING id;

-- name: treasury_remove
-- $1 chain, $2 address, $3 who
UPDATE treasury_addresses SET removed_by = $3, removed_at = now()
WHERE chain = $1 AND address = $2 AND removed_at IS NULL
RETURNING id;

-- name: treasury_post
-- $1 kind, $2 reference, $3 debited account, $4 credited account, $5 amount: the
-- balanced transfer, NULL when already posted
SELECT ledger_post_system_transfer($1, $2,
    ledger_account(split_part($3, ':', 1), split_part($3, ':', 2), split_part($3, ':', 3)),
    ledger_account(split_part($4, ':', 1), split_part($4, ':', 2), split_part($4, ':', 3)),
    $5);

-- name: deposit_event_facts
-- $1 transfer id: what a merchant's deposit event says about the deposit (its merchant:
-- the owner of the deposit address's account; NULL for an account no merchant owns), its
-- asset's scale and how many earlier credits a reorg reversed (`generation`)
SELECT d.transfer_id, d.chain, d.tx_hash, d.position, d.to_address, d.contract, d.account_id,
       d.asset, d.amount, d.block_number, d.block_hash, d.status, d.shortfall,
       a.merchant_id, s.scale, cardinality(d.past_credit_events) AS generation
FROM chain_deposits d
JOIN accounts a ON a.id = d.account_id
JOIN assets s ON s.code = d.asset
WHERE d.transfer_id = $1;
