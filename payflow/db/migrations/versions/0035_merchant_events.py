"""One event stream per merchant: every money event of a merchant, recorded once, in the
transaction that causes it.

`merchant_events` holds one row per event: an id (`evt_` + 32 hex digits, which is also
the `webhook-id` of every delivery of it), the merchant, a type (`payment.succeeded`,
`payment.failed`, `deposit.pending`, `deposit.credited`, `deposit.reversed`,
`payout.held`, `payout.sent`, `payout.confirmed`, `payout.failed`), the subject it is
about (the payment's or payout's id, a deposit's transfer id), the Standard Webhooks
`data` object (amounts as strings at the asset's scale) and the time. UNIQUE (type,
subject): a cause records its event once, however often the transaction that causes it
is retried or replayed. The service role may insert and read it, never change or delete a
row (the retention job deletes through `cleanup_merchant_events`).

Revision ID: 0035_merchant_events
Revises: 0034_hold_released_once
"""

import importlib

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0035_merchant_events"
down_revision = "0034_hold_released_once"
branch_labels = None
depends_on = None

_0032 = importlib.import_module("payflow.db.migrations.versions.0032_definer_postings")

TYPES = (
    "payment.succeeded",
    "payment.failed",
    "deposit.pending",
    "deposit.credited",
    "deposit.reversed",
    "payout.held",
    "payout.sent",
    "payout.confirmed",
    "payout.failed",
)

TABLE = f"""
    CREATE TABLE merchant_events (
        id text PRIMARY KEY CHECK (id ~ '^evt_[0-9a-f]{{32}}$'),
        merchant_id uuid NOT NULL REFERENCES merchants (id),
        type text NOT NULL CHECK (type IN ({", ".join(f"'{t}'" for t in TYPES)})),
        subject_id text NOT NULL CHECK (length(subject_id) BETWEEN 1 AND 200),
        data jsonb NOT NULL CHECK (jsonb_typeof(data) = 'object'),
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT merchant_events_once UNIQUE (type, subject_id)
    )
"""

UPGRADE: list[str] = [
    TABLE,
    # The events API pages a merchant's events by time, both ways, and by type.
    "CREATE INDEX merchant_events_merchant_idx ON merchant_events (merchant_id, created_at, id)",
    "CREATE INDEX merchant_events_created_idx ON merchant_events (created_at)",
    """
    CREATE FUNCTION cleanup_merchant_events(min_age_days integer, batch_size integer)
    RETURNS integer
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        age_days integer := greatest(coalesce(min_age_days, 30), 1);
        batch integer := least(greatest(coalesce(batch_size, 1000), 1), 10000);
        deleted integer;
    BEGIN
        WITH doomed AS (
            SELECT e.id FROM merchant_events e
            WHERE e.created_at < now() - make_interval(days => age_days)
            ORDER BY e.created_at LIMIT batch
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM merchant_events e USING doomed d WHERE e.id = d.id;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        RETURN deleted;
    END
    $$
    """,
    """
    CREATE FUNCTION payflow_grant_extra_0035_merchant_events(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        -- Appended in the causing transaction and read; removed only by the retention job.
        EXECUTE format('REVOKE ALL ON public.merchant_events FROM %I', app);
        EXECUTE format('GRANT SELECT, INSERT ON public.merchant_events TO %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.cleanup_merchant_events(integer,'
                       ' integer) TO %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0035_merchant_events(name) FROM PUBLIC",
    "REVOKE ALL ON FUNCTION cleanup_merchant_events(integer, integer) FROM PUBLIC",
    _0032.APPLY_HOOK,
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    refuse_data_loss("SELECT EXISTS (SELECT 1 FROM merchant_events)", "merchants' events")
    execute_all(
        [
            "DROP FUNCTION payflow_grant_extra_0035_merchant_events(name)",
            "DROP FUNCTION cleanup_merchant_events(integer, integer)",
            "DROP TABLE merchant_events",
        ]
    )
