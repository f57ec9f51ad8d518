"""Payouts that stall are marked, alerted on and resolved by an audited operator action.

`payouts.stall` names why an open (signed or sent) payout is not progressing:
`unaccepted` (the node refuses every broadcast of it), `unmined` (accepted, not mined
past `PAYOUT_STUCK_AFTER_S` and not bumpable further), `nonce_taken` (another signer's
transaction consumed its nonce: ours can never be mined). `stall_detail` says what the
node answered; `stalled_at` when it was first seen (the database's clock). Cleared when
the payout moves again.

`payout_actions` is the audit of operator actions on a payout (`void`: hold released,
nothing of ours mined; `resign`: a new transaction at a fresh nonce): who, why, what the
chain showed. Append-only for the service role.

Revision ID: 0026_payout_stalls
Revises: 0025_derive_key
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0026_payout_stalls"
down_revision = "0025_derive_key"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    """
    ALTER TABLE payouts
        ADD COLUMN stall TEXT CONSTRAINT payouts_stall_valid
            CHECK (stall IN ('unaccepted', 'unmined', 'nonce_taken')),
        ADD COLUMN stall_detail TEXT,
        ADD COLUMN stalled_at TIMESTAMPTZ,
        ADD CONSTRAINT payouts_stall_open
            CHECK (stall IS NULL OR status IN ('signed', 'sent')),
        ADD CONSTRAINT payouts_stall_has_time CHECK ((stall IS NULL) = (stalled_at IS NULL))
    """,
    """
    CREATE TABLE payout_actions (
        id BIGSERIAL PRIMARY KEY,
        payout_id UUID NOT NULL REFERENCES payouts (id),
        action TEXT NOT NULL CONSTRAINT payout_actions_action_valid
            CHECK (action IN ('void', 'resign')),
        actor TEXT NOT NULL CONSTRAINT payout_actions_actor_length
            CHECK (length(actor) BETWEEN 1 AND 200),
        reason TEXT NOT NULL CONSTRAINT payout_actions_reason_length
            CHECK (length(reason) BETWEEN 1 AND 2000),
        old_nonce BIGINT,
        new_nonce BIGINT,
        chain_evidence JSONB NOT NULL DEFAULT '{}'::jsonb,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    "CREATE INDEX payout_actions_payout ON payout_actions (payout_id, id)",
    """
    CREATE FUNCTION payflow_grant_extra_0026_payout_stalls(app name) RETURNS void
    LANGUAGE plpgsql SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON public.payout_actions FROM %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0026_payout_stalls(name) FROM PUBLIC",
]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_extra_0026_payout_stalls(name)",
    "DROP TABLE payout_actions",
    """
    ALTER TABLE payouts
        DROP CONSTRAINT payouts_stall_has_time,
        DROP CONSTRAINT payouts_stall_open,
        DROP COLUMN stalled_at,
        DROP COLUMN stall_detail,
        DROP COLUMN stall
    """,
]


def upgrade() -> None:
    execute_all(UPGRADE)


# Data a downgrade would lose: the operator actions' audit and the marks on open payouts.
LOSES_DATA = """
SELECT EXISTS (SELECT 1 FROM payout_actions)
    OR EXISTS (SELECT 1 FROM payouts WHERE stall IS NOT NULL)
"""


def downgrade() -> None:
    refuse_data_loss(LOSES_DATA, "the payout operator actions' audit or payout stalls")
    execute_all(DOWNGRADE)
