-- name: merchant_by_key_hash
-- $1 sha-256 hex of the presented API key
SELECT id, name, is_admin FROM merchants WHERE api_key_hash = $1;

-- name: ensure_merchant
-- $1 name, $2 api key hash, $3 webhook signing secret, $4 is admin; no-op when the key exists
INSERT INTO merchants (name, api_key_hash, webhook_secret, is_admin)
VALUES ($1, $2, $3, $4)
ON CONFLICT ON CONSTRAINT merchants_api_key_hash_unique DO NOTHING;

-- name: create_merchant
-- $1 name, $2 api key hash, $3 webhook signing secret, $4 is admin
INSERT INTO merchants (name, api_key_hash, webhook_secret, is_admin)
VALUES ($1, $2, $3, $4)
RETURNING id;

-- name: create_account
-- $1 merchant id, $2 asset
INSERT INTO accounts (merchant_id, asset) VALUES ($1, $2)
RETURNING id, merchant_id, asset, balance, held, status, created_at, updated_at;

-- name: get_account_scoped
-- $1 account id, $2 merchant id, $3 caller is admin (sees every account). The account is
-- found by its key first and its tenancy checked after (a MATERIALIZED CTE): in a custom
-- plan `merchant_id = $2` is a constant that proves the partial index accounts_merchant_idx
-- applies, and the plan walked every account of the merchant, filtered by id, instead of
-- using accounts_pkey.
WITH account AS MATERIALIZED (
    SELECT id, merchant_id, asset, balance, held, status, created_at, updated_at
    FROM accounts WHERE id = $1
)
SELECT * FROM account WHERE merchant_id = $2 OR $3::boolean;

-- name: get_event_scoped
-- $1 event id, $2 merchant id, $3 caller is admin, $4 posting idempotency key. Found by its
-- key (and its account by the account's) first, the tenancy checked after, as in
-- get_account_scoped: never the merchant's accounts walked through accounts_merchant_idx.
WITH found AS MATERIALIZED (
    SELECT e.event_id, e.account_id, e.amount, e.event_type, e.status, e.last_error,
           e.trace_id, e.created_at, e.updated_at, a.asset, a.merchant_id
    FROM payment_events e
    JOIN accounts a ON a.id = e.account_id
    WHERE e.event_id = $1
)
SELECT f.event_id, f.account_id, f.amount, f.event_type, f.status, f.last_error, f.trace_id,
       f.created_at, f.updated_at, f.asset, p.outcome
FROM found f
LEFT JOIN processed_events p ON p.idempotency_key = $4
WHERE f.merchant_id = $2 OR $3::boolean;

-- name: get_deposit_report_scoped
-- $1 stored provider event id (`gen:…`, `alchemy:…`, as the provider webhook answered it),
-- $2 merchant id, $3 caller is admin. A provider's deposit report (a hint the
-- node verifies before anything is credited) with the deposit it was matched to, if any.
-- Found by its unique key first and the tenancy checked after, as in get_account_scoped.
WITH found AS MATERIALIZED (
    SELECT r.provider_event_id, r.account_id, r.amount, r.status, r.reason, r.trace_id,
           r.created_at, r.decided_at, r.transfer_id, a.asset, a.merchant_id
    FROM chain_deposit_reports r
    JOIN accounts a ON a.id = r.account_id
    WHERE r.provider_event_id = $1
)
SELECT f.provider_event_id, f.account_id, f.amount, f.status, f.reason, f.trace_id,
       f.created_at, f.decided_at, f.transfer_id, f.asset,
       d.status AS deposit_status, d.credit_event_id
FROM found f
LEFT JOIN chain_deposits d ON d.transfer_id = f.transfer_id
WHERE f.merchant_id = $2 OR $3::boolean;
