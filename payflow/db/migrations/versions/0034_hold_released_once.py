"""A payout's hold is released once: `payout_hold_releases` records each release, and
`ledger_release_payout_hold` writes nothing for a payout already released.

Until this revision the release checked only that the payout was final, so two calls for
the same confirmed payout (a replayed settle, an operator action racing the watcher)
each subtracted amount + fee hold from `accounts.held`, and the second freed money that a
later payout's hold was covering. The release now claims the payout's row in
`payout_hold_releases` (primary key: the payout) in the statement that lowers `held`;
a second call finds the claim, changes nothing and returns the account's `held` as it is.
The service role may read the table and nothing else (no INSERT, UPDATE or DELETE), so a
release cannot be unrecorded to be taken twice.

Existing final payouts are recorded as released (their holds were released when they
became final). The downgrade drops the table: it holds no money, only the marks.

Revision ID: 0034_hold_released_once
Revises: 0033_inline_posting_key
"""

import importlib

from payflow.db.migrations.statements import execute_all

revision = "0034_hold_released_once"
down_revision = "0033_inline_posting_key"
branch_labels = None
depends_on = None

_0032 = importlib.import_module("payflow.db.migrations.versions.0032_definer_postings")

TABLE = """
    CREATE TABLE payout_hold_releases (
        payout_id uuid PRIMARY KEY REFERENCES payouts (id),
        account_id uuid NOT NULL REFERENCES accounts (id),
        released numeric(38,18) NOT NULL CHECK (released >= 0),
        released_at timestamptz NOT NULL DEFAULT now()
    )
"""

BACKFILL = """
    INSERT INTO payout_hold_releases (payout_id, account_id, released, released_at)
    SELECT p.id, p.account_id, p.amount + p.fee_hold, coalesce(p.finalized_at, now())
    FROM payouts p WHERE p.status IN ('confirmed', 'failed')
"""

RELEASE = """
    CREATE OR REPLACE FUNCTION ledger_release_payout_hold(p_payout uuid) RETURNS numeric
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_payout record;
        v_held numeric;
    BEGIN
        SELECT p.account_id, p.amount, p.fee_hold, p.status INTO v_payout
        FROM payouts p WHERE p.id = p_payout;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'ledger_release_payout_hold: payout % does not exist', p_payout
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_payout.status NOT IN ('confirmed', 'failed') THEN
            RAISE EXCEPTION 'ledger_release_payout_hold: payout % is % (not final)',
                p_payout, v_payout.status USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- Once: the claim and the release commit together; a second call finds the claim.
        INSERT INTO payout_hold_releases (payout_id, account_id, released)
        VALUES (p_payout, v_payout.account_id, v_payout.amount + v_payout.fee_hold)
        ON CONFLICT (payout_id) DO NOTHING;
        IF NOT FOUND THEN
            SELECT a.held INTO v_held FROM accounts a WHERE a.id = v_payout.account_id;
            RETURN v_held;
        END IF;
        UPDATE accounts SET held = held - (v_payout.amount + v_payout.fee_hold),
                            updated_at = now()
        WHERE id = v_payout.account_id
        RETURNING held INTO v_held;
        RETURN v_held;
    END
    $$
"""

GRANT_HOOK = """
    CREATE FUNCTION payflow_grant_extra_0034_hold_released_once(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        -- Read only: the release function (the owner) is the table's only writer.
        EXECUTE format('REVOKE ALL ON public.payout_hold_releases FROM %I', app);
        EXECUTE format('GRANT SELECT ON public.payout_hold_releases TO %I', app);
    END
    $$
"""

UPGRADE: list[str] = [
    TABLE,
    BACKFILL,
    RELEASE,
    GRANT_HOOK,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0034_hold_released_once(name) FROM PUBLIC",
    _0032.APPLY_HOOK,
]


def _release_0032() -> str:
    """0032's `CREATE FUNCTION ledger_release_payout_hold` as a `CREATE OR REPLACE`."""
    head = "CREATE FUNCTION ledger_release_payout_hold("
    bodies: list[str] = [s for s in _0032.FUNCTIONS if head in s]
    if len(bodies) != 1:
        raise RuntimeError("0032's release is not the body this revision replaces")
    body: str = bodies[0]
    return body.replace(head, "CREATE OR REPLACE FUNCTION ledger_release_payout_hold(")


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(
        [
            "DROP FUNCTION payflow_grant_extra_0034_hold_released_once(name)",
            _release_0032(),
            "DROP TABLE payout_hold_releases",
        ]
    )
