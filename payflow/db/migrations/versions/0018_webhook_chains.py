"""One live retry chain per webhook job: the job row names the chain that owns it.

A webhook job (a payment's notification) is driven by broker messages: the first one
from `finalize_payment`, its own retries through the TTL tiers (same message id, attempt
+ 1), and re-announcements (sweep, DLQ replay, a relay's duplicate publish). Only one of
them may drive the job at a time; the others are acked and dropped
(`payflow.webhooks.sender`). The owner is recorded on the row:

* `webhook_chain_message`: the broker message id (the outbox row id) of the owning chain;
* `webhook_chain_attempt`: the attempt of that message the job expects next (a copy with
  a lower attempt is a stale duplicate);
* `webhook_next_attempt_at`: when the owner is expected back (the lease's end during a
  send, the retry tier's end while it waits on a tier). A message of another chain takes
  the job over only once this is overdue by `WEBHOOK_SWEEP_AFTER_S`, and the webhook sweep
  re-announces a job only then (not by the payment's age).

All three are NULL until the first send claims the job (and after a manual DLQ replay,
which hands the job to the replay's message). The service role may UPDATE them (the
hook below; `payments` UPDATE is column-granted since 0009).

Revision ID: 0018_webhook_chains
Revises: 0017_console
"""

from payflow.db.migrations.statements import execute_all

revision = "0018_webhook_chains"
down_revision = "0017_console"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    "ALTER TABLE payments ADD COLUMN webhook_chain_message text",
    """
    ALTER TABLE payments ADD COLUMN webhook_chain_attempt integer
        CONSTRAINT payments_webhook_chain_attempt_positive CHECK (webhook_chain_attempt >= 1)
    """,
    "ALTER TABLE payments ADD COLUMN webhook_next_attempt_at timestamptz",
    """
    ALTER TABLE payments ADD CONSTRAINT payments_webhook_chain_whole
        CHECK ((webhook_chain_message IS NULL) = (webhook_chain_attempt IS NULL))
    """,
    """
    CREATE FUNCTION payflow_grant_extra_0018_webhook_chains(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        EXECUTE format('GRANT UPDATE (webhook_chain_message, webhook_chain_attempt,'
                       ' webhook_next_attempt_at) ON public.payments TO %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0018_webhook_chains(name) FROM PUBLIC",
]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_extra_0018_webhook_chains(name)",
    "ALTER TABLE payments DROP CONSTRAINT payments_webhook_chain_whole",
    "ALTER TABLE payments DROP COLUMN webhook_next_attempt_at",
    "ALTER TABLE payments DROP COLUMN webhook_chain_attempt",
    "ALTER TABLE payments DROP COLUMN webhook_chain_message",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
