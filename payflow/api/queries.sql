-- name: api_key_by_hash
-- $1 sha-256 hex of the presented API key: the live key (not revoked, not expired) with
-- its merchant and the seconds until it expires (null: never). The same statement stamps
-- last_used_at when it is older than a minute, skipping a row another transaction holds
-- locked (a revocation): a lookup never waits, and writes at most once a minute per key.
WITH found AS MATERIALIZED (
    SELECT k.id, k.merchant_id, k.scope, k.last_used_at, m.name, m.is_admin,
           extract(epoch FROM k.expires_at - now()) AS expires_in
    FROM api_keys k JOIN merchants m ON m.id = k.merchant_id
    WHERE k.key_hash = $1 AND k.revoked_at IS NULL
      AND (k.expires_at IS NULL OR k.expires_at > now())
), stamped AS (
    UPDATE api_keys u SET last_used_at = now()
    WHERE u.id = (
        SELECT l.id FROM api_keys l
        WHERE l.id = (SELECT f.id FROM found f
                      WHERE f.last_used_at IS NULL
                         OR f.last_used_at < now() - interval '1 minute')
        FOR UPDATE SKIP LOCKED
    )
    RETURNING u.id
)
SELECT id, merchant_id, scope, name, is_admin, expires_in FROM found;

-- name: lock_bootstrap
-- (no parameters) serialises replicas creating the bootstrap merchants (transaction lock)
SELECT pg_advisory_xact_lock(hashtext('payflow.api.bootstrap_merchants'));

-- name: api_key_exists
-- $1 sha-256 hex of a key: whether any key (live or not) has it
SELECT EXISTS (SELECT 1 FROM api_keys WHERE key_hash = $1);

-- name: create_merchant
-- $1 name, $2 webhook signing secret, $3 is admin
INSERT INTO merchants (name, webhook_secret, is_admin)
VALUES ($1, $2, $3)
RETURNING id;

-- name: merchant_exists
-- $1 merchant id
SELECT EXISTS (SELECT 1 FROM merchants WHERE id = $1);

-- name: insert_api_key
-- $1 merchant id, $2 name, $3 scope, $4 sha-256 hex of the key, $5 its last four
-- characters or null, $6 expiry or null
INSERT INTO api_keys (merchant_id, name, scope, key_hash, hint, expires_at)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id, merchant_id, name, scope, hint, created_at, expires_at, revoked_at,
          last_used_at;

-- name: count_active_keys
-- $1 merchant id: its keys neither revoked nor expired (through api_keys_merchant_idx)
SELECT count(*) FROM api_keys
WHERE merchant_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now());

-- name: list_api_keys
-- $1 merchant id or null (every merchant's keys), $2 page size. Oldest first per merchant.
SELECT k.id, k.merchant_id, m.name AS merchant_name, k.name, k.scope, k.hint, k.created_at,
       k.expires_at, k.revoked_at, k.last_used_at
FROM api_keys k JOIN merchants m ON m.id = k.merchant_id
WHERE ($1::uuid IS NULL OR k.merchant_id = $1)
ORDER BY m.name, k.merchant_id, k.created_at, k.id
LIMIT $2;

-- name: get_api_key
-- $1 key id, $2 merchant id or null (any merchant's key). The key by its primary key,
-- the tenancy checked after (IS NOT DISTINCT FROM: see the console's get_account).
SELECT k.id, k.merchant_id, m.name AS merchant_name, k.name, k.scope, k.hint, k.created_at,
       k.expires_at, k.revoked_at, k.last_used_at
FROM api_keys k JOIN merchants m ON m.id = k.merchant_id
WHERE k.id = $1 AND ($2::uuid IS NULL OR k.merchant_id IS NOT DISTINCT FROM $2);

-- name: lock_merchant_keys
-- $1 merchant id: every key of the merchant, locked in id order (a revocation decides on
-- the merchant's live write keys while none can change), with whether each is live
SELECT id, scope,
       revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) AS live
FROM api_keys WHERE merchant_id = $1
ORDER BY id
FOR UPDATE;

-- name: revoke_api_key
-- $1 key id, $2 merchant id: revoke once (a revoked key keeps its first revoked_at);
-- returns the digest so this process can drop the key from its cache
UPDATE api_keys SET revoked_at = now()
WHERE id = $1 AND merchant_id = $2 AND revoked_at IS NULL
RETURNING key_hash;

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
