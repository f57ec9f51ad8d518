"""Webhook delivery leases (issue 10). Placeholder.

Revision ID: 0016_webhook_leases
Revises: 0015_payouts
"""

from payflow.db.migrations.statements import execute_all

revision = "0016_webhook_leases"
down_revision = "0015_payouts"
branch_labels = None
depends_on = None

UPGRADE: list[str] = []

DOWNGRADE: list[str] = []


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
