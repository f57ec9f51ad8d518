"""Chain truth: deposit observations and their lifecycle (issue 8). Placeholder.

Revision ID: 0013_chain_deposits
Revises: 0012_grant_hooks
"""

from payflow.db.migrations.statements import execute_all

revision = "0013_chain_deposits"
down_revision = "0012_grant_hooks"
branch_labels = None
depends_on = None

UPGRADE: list[str] = []

DOWNGRADE: list[str] = []


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
