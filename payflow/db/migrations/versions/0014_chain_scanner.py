"""Chain truth: scanner cursor and derived deposit addresses (issue 8). Placeholder.

Revision ID: 0014_chain_scanner
Revises: 0013_chain_deposits
"""

from payflow.db.migrations.statements import execute_all

revision = "0014_chain_scanner"
down_revision = "0013_chain_deposits"
branch_labels = None
depends_on = None

UPGRADE: list[str] = []

DOWNGRADE: list[str] = []


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
