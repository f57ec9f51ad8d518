"""Money: wider balances and per-asset limits (issue 7).

Revision ID: 0008_money_limits
Revises: 0007_pipeline_sweeps
"""

from payflow.db.migrations.statements import execute_all

revision = "0008_money_limits"
down_revision = "0007_pipeline_sweeps"
branch_labels = None
depends_on = None

UPGRADE: list[str] = []

DOWNGRADE: list[str] = []


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
