"""Least privilege: owner and service roles (issue 7).

Revision ID: 0009_roles
Revises: 0008_money_limits
"""

from payflow.db.migrations.statements import execute_all

revision = "0009_roles"
down_revision = "0008_money_limits"
branch_labels = None
depends_on = None

UPGRADE: list[str] = []

DOWNGRADE: list[str] = []


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
