"""A receipt that moved the hot wallet's tokens otherwise than the payout is a stored stall.

`payouts.stall` gains `transfer_mismatch`: a mined status-1 receipt of the payout moved
the hot wallet's tokens otherwise than exactly the payout (part to the recipient, some
elsewhere, twice, logged by another contract). The job never settles it; `stall_detail`
lists each Transfer out of the hot wallet (contract, from, to, units). Only an operator
resolves it: `payout_actions.action` gains `settle` (`payflow payouts settle ID --as
confirmed|failed`, allowed once the receipt is final), its `chain_evidence` the receipt.

Revision ID: 0028_transfer_mismatch
Revises: 0027_chain_identity
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0028_transfer_mismatch"
down_revision = "0027_chain_identity"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    """
    ALTER TABLE payouts
        DROP CONSTRAINT payouts_stall_valid,
        ADD CONSTRAINT payouts_stall_valid
            CHECK (stall IN ('unaccepted', 'unmined', 'nonce_taken', 'transfer_mismatch'))
    """,
    """
    ALTER TABLE payout_actions
        DROP CONSTRAINT payout_actions_action_valid,
        ADD CONSTRAINT payout_actions_action_valid
            CHECK (action IN ('void', 'resign', 'settle'))
    """,
]

DOWNGRADE: list[str] = [
    """
    ALTER TABLE payout_actions
        DROP CONSTRAINT payout_actions_action_valid,
        ADD CONSTRAINT payout_actions_action_valid CHECK (action IN ('void', 'resign'))
    """,
    """
    ALTER TABLE payouts
        DROP CONSTRAINT payouts_stall_valid,
        ADD CONSTRAINT payouts_stall_valid
            CHECK (stall IN ('unaccepted', 'unmined', 'nonce_taken'))
    """,
]


def upgrade() -> None:
    execute_all(UPGRADE)


# Data a downgrade would lose (the older CHECKs reject it): payouts marked with a transfer
# mismatch and the audit of operator settlements.
LOSES_DATA = """
SELECT EXISTS (SELECT 1 FROM payouts WHERE stall = 'transfer_mismatch')
    OR EXISTS (SELECT 1 FROM payout_actions WHERE action = 'settle')
"""


def downgrade() -> None:
    refuse_data_loss(LOSES_DATA, "payouts stalled on a transfer mismatch or operator settlements")
    if _forced():
        execute_all(FORCED_CLEANUP)
    execute_all(DOWNGRADE)


# A forced downgrade drops what the older CHECKs refuse: the marks (the payouts stay open,
# their holds kept) and the settlement audit rows.
FORCED_CLEANUP: list[str] = [
    """
    UPDATE payouts SET stall = NULL, stall_detail = NULL, stalled_at = NULL
    WHERE stall = 'transfer_mismatch'
    """,
    "DELETE FROM payout_actions WHERE action = 'settle'",
]


def _forced() -> bool:
    from alembic import context

    return bool(context.config.attributes.get("force"))
