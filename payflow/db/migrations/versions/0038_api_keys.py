"""Several API keys per merchant: named, scoped (`read` or `write`), optionally expiring,
revocable, with a throttled `last_used_at`.

`api_keys` holds one row per key: the merchant, a name (1 to 100 characters), a scope
(`write` may move money, `read` may only GET/HEAD), the SHA-256 hex of the key
(`api_keys_hash_unique`: a key resolves to one row), the key's last four characters as a
hint for lists (NULL for keys carried over from `merchants`), its creation, expiry and
revocation times and when it was last used (written at most once a minute by the lookup).

Each merchant's key of the older schema (`merchants.api_key_hash`) becomes its `default`
`write` key, so every existing key keeps working; the column is dropped: `api_keys` is the
one place a key lives. `console_sessions.api_key_id` names the key a session signed in
with, so revoking (or the expiry of) that key ends its sessions; existing sessions get
their merchant's default key.

The service role may read keys, insert them (not choosing id or times) and update only
`revoked_at` and `last_used_at`; it never deletes a key.

The downgrade puts each merchant's oldest live write key back into `merchants`; it
refuses while a merchant has more than one key or any key is read-only, expired or revoked
(the older schema would lose it or bring it back to life), unless forced. Forced, a
merchant without a live write key gets a hash no key has.

Revision ID: 0038_api_keys
Revises: 0037_event_emission
"""

import importlib

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0038_api_keys"
down_revision = "0037_event_emission"
branch_labels = None
depends_on = None

_0032 = importlib.import_module("payflow.db.migrations.versions.0032_definer_postings")

TABLE = """
    CREATE TABLE api_keys (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        merchant_id uuid NOT NULL REFERENCES merchants (id),
        name text NOT NULL,
        scope text NOT NULL,
        key_hash text NOT NULL,
        hint text,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz,
        revoked_at timestamptz,
        last_used_at timestamptz,
        CONSTRAINT api_keys_name_length CHECK (length(name) BETWEEN 1 AND 100),
        CONSTRAINT api_keys_scope_valid CHECK (scope IN ('read', 'write')),
        CONSTRAINT api_keys_hint_length CHECK (hint IS NULL OR length(hint) = 4),
        CONSTRAINT api_keys_expiry_after_creation
            CHECK (expires_at IS NULL OR expires_at > created_at),
        CONSTRAINT api_keys_hash_unique UNIQUE (key_hash)
    )
"""

GRANT_HOOK = """
    CREATE FUNCTION payflow_grant_extra_0038_api_keys(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        -- Keys are read, created and revoked (and their use stamped); never deleted,
        -- never re-scoped, never given back their secret or another merchant.
        EXECUTE format('REVOKE ALL ON public.api_keys FROM %I', app);
        EXECUTE format('GRANT SELECT ON public.api_keys TO %I', app);
        EXECUTE format('GRANT INSERT (merchant_id, name, scope, key_hash, hint, expires_at)'
                       ' ON public.api_keys TO %I', app);
        EXECUTE format('GRANT UPDATE (revoked_at, last_used_at) ON public.api_keys TO %I',
                       app);
    END
    $$
"""

UPGRADE: list[str] = [
    TABLE,
    # A merchant's keys, listed in creation order.
    "CREATE INDEX api_keys_merchant_idx ON api_keys (merchant_id, created_at, id)",
    """
    INSERT INTO api_keys (merchant_id, name, scope, key_hash, created_at)
    SELECT id, 'default', 'write', api_key_hash, created_at FROM merchants
    """,
    "ALTER TABLE console_sessions ADD COLUMN api_key_id uuid REFERENCES api_keys (id)",
    """
    UPDATE console_sessions s SET api_key_id = k.id
    FROM api_keys k WHERE k.merchant_id = s.merchant_id
    """,
    "ALTER TABLE console_sessions ALTER COLUMN api_key_id SET NOT NULL",
    "ALTER TABLE merchants DROP CONSTRAINT merchants_api_key_hash_unique",
    "ALTER TABLE merchants DROP COLUMN api_key_hash",
    GRANT_HOOK,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0038_api_keys(name) FROM PUBLIC",
    _0032.APPLY_HOOK,
]

# True while the older schema (one write key per merchant, in `merchants`) would lose a
# key or bring a read-only, expired or revoked one back as a working write key.
AT_RISK = """
    SELECT EXISTS (
        SELECT 1 FROM api_keys k
        WHERE k.scope <> 'write' OR k.revoked_at IS NOT NULL
           OR (k.expires_at IS NOT NULL AND k.expires_at <= now())
           OR EXISTS (SELECT 1 FROM api_keys o WHERE o.merchant_id = k.merchant_id
                      AND o.id <> k.id)
    )
"""

DOWNGRADE: list[str] = [
    "ALTER TABLE merchants ADD COLUMN api_key_hash text",
    """
    UPDATE merchants m SET api_key_hash = coalesce(
        (SELECT k.key_hash FROM api_keys k
         WHERE k.merchant_id = m.id AND k.scope = 'write' AND k.revoked_at IS NULL
           AND (k.expires_at IS NULL OR k.expires_at > now())
         ORDER BY k.created_at, k.id LIMIT 1),
        encode(sha256(convert_to('payflow-no-key:' || gen_random_uuid()::text, 'UTF8')),
               'hex'))
    """,
    "ALTER TABLE merchants ALTER COLUMN api_key_hash SET NOT NULL",
    "ALTER TABLE merchants ADD CONSTRAINT merchants_api_key_hash_unique UNIQUE (api_key_hash)",
    "ALTER TABLE console_sessions DROP COLUMN api_key_id",
    "DROP FUNCTION payflow_grant_extra_0038_api_keys(name)",
    "DROP TABLE api_keys",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    refuse_data_loss(AT_RISK, "API keys beyond one live write key per merchant")
    execute_all(DOWNGRADE)
