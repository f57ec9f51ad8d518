-- name: create_account
-- $1 asset. The account starts with no money (the service role may not name balance, held
-- or initial_balance, migration 0032); an opening balance arrives by post_opening
INSERT INTO accounts (asset) VALUES ($1)
RETURNING id, asset, balance, initial_balance, status, created_at, updated_at;

-- name: post_opening
-- $1 account id, $2 amount (> 0): the opening transfer opening:<asset> -> account, once per
-- account (ledger_transfers_reference_unique), recorded in initial_balance; returns the
-- balance after. An operator's act: the service role may not execute it (migration 0032)
SELECT ledger_post_opening($1, $2);

-- name: get_account
-- $1 account id
SELECT id, asset, balance, initial_balance, status, created_at, updated_at
FROM accounts WHERE id = $1;

-- name: set_account_status
-- $1 account id, $2 new status
UPDATE accounts SET status = $2, updated_at = now() WHERE id = $1
RETURNING id;

-- name: asset_scale
-- $1 asset code
SELECT scale FROM assets WHERE code = $1;

-- name: insert_event
-- $1 event id, $2 account id, $3 amount, $4 event type, $5 trace id
INSERT INTO payment_events (event_id, account_id, amount, event_type, trace_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id;

-- name: get_event
-- $1 event id
SELECT event_id, account_id, amount, event_type, status, retry_count, last_error, trace_id,
       created_at, updated_at
FROM payment_events WHERE event_id = $1;

-- name: transition_event
-- $1 event id, $2 target status, $3 statuses it may come from. The statuses are read
-- through a subquery (an InitPlan): a custom plan would otherwise see a constant such as
-- '{pending}', prove the partial index payment_events_pending_idx applies, and find the
-- event by walking every pending event instead of payment_events_pkey.
UPDATE payment_events SET status = $2, updated_at = now()
WHERE event_id = $1 AND status = ANY (ARRAY(SELECT unnest($3::text[])))
RETURNING event_id, account_id, amount, event_type, status;

-- name: transition_events
-- $1 event ids, $2 target status, $3 statuses they may come from. Set-based compare-and-set:
-- returns only the events that moved; btree ANY() scans (and so locks) in event_id order.
-- The statuses through an InitPlan, as in transition_event: the key's index, never a
-- partial index of one status filtered by the ids.
UPDATE payment_events SET status = $2, updated_at = now()
WHERE event_id = ANY($1::text[]) AND status = ANY (ARRAY(SELECT unnest($3::text[])))
RETURNING event_id;

-- name: existing_events
-- $1 event ids: those that exist
SELECT event_id FROM payment_events WHERE event_id = ANY($1::text[]);

-- name: event_status
-- $1 event id
SELECT status FROM payment_events WHERE event_id = $1;

-- name: claim_idempotency
-- $1 idempotency key, $2 event id; returns a row only for the first claimant
INSERT INTO processed_events (idempotency_key, event_id, outcome)
VALUES ($1, $2, 'pending')
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING idempotency_key;

-- name: recorded_outcome
-- $1 idempotency key
SELECT outcome FROM processed_events WHERE idempotency_key = $1;

-- name: record_outcome
-- $1 idempotency key, $2 outcome
UPDATE processed_events SET outcome = $2 WHERE idempotency_key = $1;

-- name: post_success
-- $1 idempotency key, $2 event id, $3 statuses it may be confirmed from, $4 credit event
-- types, $5 event types a frozen account refuses, $6 lock_timeout (ms), $7 the event's
-- held-back ledger.event outbox row (null: none).
-- The whole success path in one statement (migration 0020), sent OUTSIDE a transaction so
-- PostgreSQL commits it before answering and the account's row lock never waits on the
-- client. Returns balance_after, or NULL (a duplicate: nothing written); SQLSTATE PF001
-- when the full path must decide (nothing written either). A committed success also
-- deletes the job $7 unless a relay holds it right now (SKIP LOCKED: never wait on a
-- relay while the account is locked; its message then meets a recorded posting).
-- "Unpublished" is num_nulls(published_at) = 1, not published_at IS NULL: that would let
-- the planner find the job by walking the partial index outbox_due_idx (every unpublished
-- row) instead of outbox_pkey.
WITH posted AS MATERIALIZED (
    SELECT ledger_post_success($1, $2, $3::text[], $4::text[], $5::text[], $6) AS balance_after
), settled AS (
    DELETE FROM outbox
    WHERE id = (SELECT o.id FROM outbox o
                WHERE o.id = $7::bigint AND num_nulls(o.published_at) = 1
                FOR UPDATE SKIP LOCKED)
      AND EXISTS (SELECT 1 FROM posted WHERE balance_after IS NOT NULL)
    RETURNING id
)
SELECT balance_after FROM posted, (SELECT count(*) FROM settled) AS done;

-- name: post_success_together
-- $1 the events' posting keys, $2 their ids (same order), $3-$5 as post_success's $3-$5,
-- $6 lock_timeout (ms). `ledger_post_success` once per event in ONE statement, sent
-- outside a transaction, so one commit (`payflow.ledger.together`): each row is (n, the
-- event's balance_after or NULL), n its position in $2. The events are posted in account
-- order, then event id, so batches take their claims and accounts' row locks in one
-- order. Any error undoes every event's writes.
SELECT s.n, ledger_post_success(s.key, s.event_id, $3::text[], $4::text[], $5::text[], $6)
           AS balance_after
FROM (SELECT k.key, k.event_id, k.n
      FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(key, event_id, n)
      LEFT JOIN payment_events e ON e.event_id = k.event_id
      ORDER BY e.account_id, k.event_id
      OFFSET 0) AS s;

-- name: apply_balance_change
-- $1 account id, $2 signed amount, $3 event type, $4 source event id, $5 debits only from active
-- The guarded balance change, its ledger row and the counterparty leg on a system account,
-- in the SECURITY DEFINER function of migration 0032 (the service role cannot write the
-- journal or the balance itself). The guard keeps open payout holds whole: a debit never
-- takes the balance below `held`. NULL when the guard refuses (nothing written). The row
-- lock taken here is held until commit; callers issue it last.
SELECT ledger_apply_balance_change($1, $2, $3, $4, $5);

-- name: account_debit_refusal
-- $1 account id; why a debit was refused: the status and balance as of now
SELECT status, balance FROM accounts WHERE id = $1;

-- name: ledger_entries
-- $1 account id, $2 cursor (entries with id below it), $3 page size
SELECT id, amount, event_type, source_event_id, balance_after, created_at
FROM balance_events
WHERE account_id = $1 AND ($2::bigint IS NULL OR id < $2)
ORDER BY id DESC
LIMIT $3;

-- name: recon_recent
-- $1 minutes: accounts with ledger rows that recent, checked against their journal: their
-- payment events' legs (balance_events) and their transfers' legs (an opening, ledger_legs)
WITH touched AS (
    SELECT DISTINCT account_id FROM balance_events
    WHERE created_at > now() - make_interval(mins => $1)
)
SELECT a.id, a.balance, COALESCE(s.total, 0) + COALESCE(o.total, 0) AS ledger_total
FROM accounts a
JOIN touched t ON t.account_id = a.id
LEFT JOIN LATERAL (
    SELECT sum(amount) AS total FROM balance_events b WHERE b.account_id = a.id
) s ON true
LEFT JOIN LATERAL (
    SELECT sum(amount) AS total FROM ledger_legs l WHERE l.account_id = a.id
) o ON true
WHERE a.balance <> COALESCE(s.total, 0) + COALESCE(o.total, 0);

-- name: recon_recent_count
-- $1 minutes
SELECT count(DISTINCT account_id) FROM balance_events
WHERE created_at > now() - make_interval(mins => $1);

-- name: recon_full
-- every customer account whose balance differs from its journal (its balance_events and
-- its transfers' legs: initial_balance is no source of money)
SELECT a.id, a.balance, COALESCE(s.total, 0) AS ledger_total
FROM accounts a
LEFT JOIN (
    SELECT j.account_id, sum(j.amount) AS total FROM (
        SELECT account_id, amount FROM balance_events
        UNION ALL
        SELECT account_id, amount FROM ledger_legs WHERE account_id IS NOT NULL
    ) j GROUP BY j.account_id
) s ON s.account_id = a.id
WHERE a.balance <> COALESCE(s.total, 0);

-- name: recon_trial_balance
-- per asset over the whole journal: debits (legs < 0) and credits (legs > 0), which must be
-- equal; `asset` NULL gathers legs naming an unknown account
SELECT asset, COALESCE(-sum(amount) FILTER (WHERE amount < 0), 0) AS debits,
       COALESCE(sum(amount) FILTER (WHERE amount > 0), 0) AS credits
FROM ledger_journal
GROUP BY asset
ORDER BY asset NULLS FIRST;

-- name: recon_unbalanced_postings
-- $1 limit: postings (a payment event or a transfer) whose legs do not sum to zero per asset
SELECT COALESCE(source_event_id, 'transfer:' || transfer_id) AS posting, asset,
       sum(amount) AS total
FROM ledger_journal
GROUP BY source_event_id, transfer_id, asset
HAVING asset IS NULL OR sum(amount) <> 0
ORDER BY 1
LIMIT $1;

-- name: chart_of_accounts
-- payflow's own accounts with their balances on their normal side (summed from the
-- journal: they keep no running balance), and the legs behind each
SELECT s.code, s.kind, s.chain, s.asset, s.normal_side,
       COALESCE(CASE WHEN s.normal_side = 'credit' THEN t.total ELSE -t.total END, 0) AS balance,
       COALESCE(t.legs, 0) AS legs
FROM ledger_accounts s
LEFT JOIN (
    SELECT ledger_account, sum(amount) AS total, count(*) AS legs FROM ledger_legs
    WHERE ledger_account IS NOT NULL GROUP BY ledger_account
) t ON t.ledger_account = s.code
ORDER BY s.asset, s.code;

-- name: customer_totals
-- per asset: what payflow owes its customers and merchants (their balances, credit side)
SELECT asset, sum(balance) AS balance, count(*) AS accounts FROM accounts
GROUP BY asset ORDER BY asset;

-- name: account_count
SELECT count(*) FROM accounts;

-- name: recon_duplicate_ledger
-- payment events with more than one ledger row (any event type)
SELECT source_event_id, count(*) AS rows
FROM balance_events GROUP BY source_event_id HAVING count(*) > 1;

-- name: recon_confirmed_without_ledger
-- confirmed events that never reached the ledger
SELECT e.event_id FROM payment_events e
WHERE e.status = 'confirmed'
  AND NOT EXISTS (SELECT 1 FROM balance_events b WHERE b.source_event_id = e.event_id);

-- name: recon_ledger_without_success
-- ledger rows whose event is not confirmed
SELECT b.source_event_id FROM balance_events b
JOIN payment_events e ON e.event_id = b.source_event_id
WHERE e.status <> 'confirmed';

-- name: reopen_failed_event
-- $1 event id. Manual DLQ replay only: a failed event that was never posted goes back to
-- pending. An event with a posting record (any outcome) is never reopened.
UPDATE payment_events SET status = 'pending', updated_at = now()
WHERE event_id = $1 AND status = 'failed'
  AND NOT EXISTS (SELECT 1 FROM processed_events p WHERE p.event_id = $1)
RETURNING event_id;

-- name: set_event_error
-- $1 event id, $2 error text (for operators; never shown with driver details to clients)
UPDATE payment_events SET last_error = $2, updated_at = now() WHERE event_id = $1;

-- name: asset_limits
-- $1 asset code: its scale and per-operation maxima
SELECT code, scale, max_payment, max_withdrawal, max_deposit FROM assets WHERE code = $1;

-- name: all_asset_limits
SELECT code, scale, max_payment, max_withdrawal, max_deposit FROM assets ORDER BY code;

-- name: set_asset_limits
-- $1 asset code, $2 max payment, $3 max withdrawal, $4 max deposit (NULL keeps the value)
UPDATE assets
SET max_payment = COALESCE($2, max_payment),
    max_withdrawal = COALESCE($3, max_withdrawal),
    max_deposit = COALESCE($4, max_deposit)
WHERE code = $1
RETURNING code, scale, max_payment, max_withdrawal, max_deposit;

-- name: cleanup_processed_events
-- $1 minimum age in days (clamped up to 14 by the function), $2 batch size (clamped to
-- [1, 10000]). The only way the service removes posting claims: the SECURITY DEFINER
-- function of migration 0009 deletes terminal outcomes of terminal events, never 'pending'.
SELECT cleanup_processed_events($1, $2);

-- name: has_posting_claim
-- $1 idempotency key of the event's posting
SELECT outcome FROM processed_events WHERE idempotency_key = $1;

-- name: event_for_replay
-- $1 event id
SELECT event_id, status, trace_id FROM payment_events WHERE event_id = $1 FOR UPDATE;

-- name: stale_enqueued_events
-- $1 first wait in seconds (STALE_EVENT_TIMEOUT_S), $2 wait cap (SWEEP_MAX_BACKOFF_S),
-- $3 limit. Events handed to the broker but not finished within their wait, which
-- doubles with every re-announcement (retry_count) up to the cap. The first condition
-- is the sargable bound for payment_events_enqueued_idx.
SELECT event_id, retry_count, trace_id, created_at FROM payment_events
WHERE status = 'enqueued'
  AND updated_at < now() - make_interval(secs => least($1::float8, $2::float8))
  AND updated_at < now() - make_interval(secs => least($2::float8, $1::float8 * power(2, least(retry_count, 40))))
ORDER BY updated_at
LIMIT $3
FOR UPDATE SKIP LOCKED;

-- name: orphaned_pending_events
-- $1 first wait in seconds, $2 wait cap, $3 limit. Pending events past their wait with
-- no unpublished `ledger.event` row that would announce them (the row was published
-- but the event never moved, or it is gone): nothing would ever post them. An event
-- whose row is still waiting for the relay (or backing off) is not touched.
SELECT e.event_id, e.retry_count, e.trace_id, e.created_at FROM payment_events e
WHERE e.status = 'pending'
  AND e.created_at < now() - make_interval(secs => least($1::float8, $2::float8))
  AND e.updated_at < now() - make_interval(secs => least($2::float8, $1::float8 * power(2, least(e.retry_count, 40))))
  AND NOT EXISTS (
      SELECT 1 FROM outbox o
      WHERE o.published_at IS NULL AND o.topic = 'ledger.event'
        AND o.payload ->> 'event_id' = e.event_id
  )
ORDER BY e.created_at
LIMIT $3
FOR UPDATE OF e SKIP LOCKED;

-- name: stale_unfinished_events
-- $1 age in seconds: pending or processing events older than that (alert only). One arm
-- per status, so each is served by its partial index (payment_events_pending_idx,
-- payment_events_processing_idx) and the cost follows the unfinished rows, not the
-- ledger: `status IN (...)` proves neither index's predicate and scanned the table.
SELECT status, count(*) AS stale FROM payment_events
WHERE (status = 'pending' AND updated_at < now() - make_interval(secs => $1))
   OR (status = 'processing' AND updated_at < now() - make_interval(secs => $1))
GROUP BY status;

-- name: bump_retry_count
-- $1 event id, $2 last error. Counts one re-announcement and restarts its wait. Not a
-- status write: the state machine moves the status.
UPDATE payment_events SET retry_count = retry_count + 1, last_error = $2, updated_at = now()
WHERE event_id = $1
RETURNING retry_count;

-- name: chain_native_decimals
-- $1 chain: its native asset and that asset's decimals (what its gas is paid in)
SELECT native_asset, native_decimals FROM chains WHERE chain = $1;

-- name: post_network_fee
-- $1 chain, $2 tx hash, $3 amount in the native asset: the network_fee transfer's id, NULL
-- when that transaction's gas is posted already (migration 0031)
SELECT ledger_post_network_fee($1, $2, $3);

-- name: post_reorg_shortfall
-- $1 reference (the reversal's event id), $2 deposit transfer id, $3 shortfall: the
-- reorg_shortfall transfer's id, NULL when posted already (migration 0031)
SELECT ledger_post_reorg_shortfall($1, $2, $3);

-- name: post_reorg_recovery
-- $1 reference (the re-credit's event id), $2 deposit transfer id, $3 the shortfall taken
-- back: the reorg_recovery transfer's id, NULL when posted already (migration 0031)
SELECT ledger_post_reorg_recovery($1, $2, $3);

-- name: post_adjustment
-- $1 account (uuid or system code), $2 against (system code), $3 signed amount, $4 reason,
-- $5 by, $6 reference: (transfer_id, created) (migration 0031)
SELECT transfer_id, created FROM ledger_post_adjustment($1, $2, $3, $4, $5, $6);

-- name: adjustment_by_transfer
-- $1 transfer id: the adjustment's audit row
SELECT * FROM ledger_adjustments WHERE transfer_id = $1;

-- name: system_account_asset
-- $1 code: the asset of that system account (NULL when there is none)
SELECT asset FROM ledger_accounts WHERE code = $1;

-- name: balance_at
-- $1 account id, $2 instant: the account's balance from its journal, every leg written at or
-- before the instant (its payment events' legs in balance_events, its transfers' legs in
-- ledger_legs). A leg's created_at is its transaction's start, so a posting's legs share it.
SELECT COALESCE((SELECT sum(b.amount) FROM balance_events b
                 WHERE b.account_id = $1 AND b.created_at <= $2), 0)
     + COALESCE((SELECT sum(l.amount) FROM ledger_legs l
                 WHERE l.account_id = $1 AND l.created_at <= $2), 0) AS balance;

-- name: statement_movements
-- $1 account id, $2 period start (exclusive), $3 period end (inclusive), $4 at most this many:
-- the account's legs in the period, oldest first (a transfer's leg before a payment event's
-- at the same instant, then by id), each with the account on the other side of its
-- posting: the system account (code, kind) or, for a transfer between customer accounts,
-- `account:<id>` of kind `account`. The counterparties are looked up after the LIMIT.
WITH legs AS (
    SELECT b.created_at, 1 AS src, b.id, b.amount, b.event_type AS kind,
           b.source_event_id AS reference, b.source_event_id AS event_id,
           NULL::bigint AS transfer_id
    FROM balance_events b
    WHERE b.account_id = $1 AND b.created_at > $2 AND b.created_at <= $3
    UNION ALL
    SELECT l.created_at, 0, l.id, l.amount, t.kind, t.reference, NULL, l.transfer_id
    FROM ledger_legs l JOIN ledger_transfers t ON t.id = l.transfer_id
    WHERE l.account_id = $1 AND l.created_at > $2 AND l.created_at <= $3
), page AS (
    SELECT * FROM legs ORDER BY created_at, src, id LIMIT $4
)
SELECT m.created_at, m.amount, m.kind, m.reference,
       COALESCE(e.code, t.code) AS counterparty,
       COALESCE(s.kind, CASE WHEN COALESCE(e.code, t.code) IS NOT NULL THEN 'account' END)
           AS counterparty_kind
FROM page m
LEFT JOIN LATERAL (
    SELECT COALESCE(o.ledger_account, 'account:' || o.account_id::text) AS code
    FROM ledger_legs o WHERE o.source_event_id = m.event_id ORDER BY o.id LIMIT 1
) e ON true
LEFT JOIN LATERAL (
    SELECT COALESCE(o.ledger_account, 'account:' || o.account_id::text) AS code
    FROM ledger_legs o WHERE o.transfer_id = m.transfer_id AND o.id <> m.id
    ORDER BY o.id LIMIT 1
) t ON true
LEFT JOIN ledger_accounts s ON s.code = COALESCE(e.code, t.code)
ORDER BY m.created_at, m.src, m.id;

-- name: account_transfer_legs
-- $1 account id, $2 at most this many: the account's legs of transfers (an opening, an
-- operator adjustment), newest first, each with the account on the other side.
SELECT l.created_at, t.kind, t.reference, l.amount, o.code AS counterparty,
       COALESCE(s.kind, CASE WHEN o.code IS NOT NULL THEN 'account' END) AS counterparty_kind
FROM ledger_legs l
JOIN ledger_transfers t ON t.id = l.transfer_id
LEFT JOIN LATERAL (
    SELECT COALESCE(x.ledger_account, 'account:' || x.account_id::text) AS code
    FROM ledger_legs x WHERE x.transfer_id = l.transfer_id AND x.id <> l.id
    ORDER BY x.id LIMIT 1
) o ON true
LEFT JOIN ledger_accounts s ON s.code = o.code
WHERE l.account_id = $1
ORDER BY l.id DESC
LIMIT $2;

-- name: counterparty_legs
-- $1 payment event ids (text[]): the legs of their postings that are not on the customer
-- account (balance_events holds that one), with the system account's kind
SELECT l.source_event_id, COALESCE(l.ledger_account, 'account:' || l.account_id::text) AS code,
       COALESCE(s.kind, 'account') AS kind, l.amount, l.created_at
FROM ledger_legs l LEFT JOIN ledger_accounts s ON s.code = l.ledger_account
WHERE l.source_event_id = ANY($1::text[])
ORDER BY l.source_event_id, l.id;

-- name: asset_scales
SELECT code, scale FROM assets ORDER BY code;
