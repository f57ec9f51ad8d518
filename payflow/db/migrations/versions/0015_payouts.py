"""On-chain payouts: holds, hot-wallet nonces, signed transactions (issue 11). Placeholder.

Revision ID: 0015_payouts
Revises: 0014_chain_scanner
"""

from payflow.db.migrations.statements import execute_all

revision = "0015_payouts"
down_revision = "0014_chain_scanner"
branch_labels = None
depends_on = None

UPGRADE: list[str] = []

DOWNGRADE: list[str] = []


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
