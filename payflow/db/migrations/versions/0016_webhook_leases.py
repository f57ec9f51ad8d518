"""Webhook delivery leases: a send claims the payment's webhook for a bounded
time in a short transaction, POSTs with no transaction open, and records the result in a
second short transaction (`payflow.webhooks.sender`).

`webhook_lease_token` names the send holding the lease and `webhook_lease_until` (the
database's clock) ends it; both are NULL when no send holds one. The CHECK keeps them set
together. The service role may UPDATE them (the hook below; `payments` UPDATE is
column-granted since 0009).

Revision ID: 0016_webhook_leases
Revises: 0015_payouts
"""

from payflow.db.migrations.statements import execute_all

revision = "0016_webhook_leases"
down_revision = "0015_payouts"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    "ALTER TABLE payments ADD COLUMN webhook_lease_token text",
    "ALTER TABLE payments ADD COLUMN webhook_lease_until timestamptz",
    """
    ALTER TABLE payments ADD CONSTRAINT payments_webhook_lease_whole
        CHECK ((webhook_lease_token IS NULL) = (webhook_lease_until IS NULL))
    """,
    """
    CREATE FUNCTION payflow_grant_extra_0016_webhook_leases(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        EXECUTE format('GRANT UPDATE (webhook_lease_token, webhook_lease_until)'
                       ' ON public.payments TO %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0016_webhook_leases(name) FROM PUBLIC",
]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_extra_0016_webhook_leases(name)",
    "ALTER TABLE payments DROP CONSTRAINT payments_webhook_lease_whole",
    "ALTER TABLE payments DROP COLUMN webhook_lease_until",
    "ALTER TABLE payments DROP COLUMN webhook_lease_token",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
