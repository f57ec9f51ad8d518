"""Console sessions (issue 12). Placeholder.

Revision ID: 0017_console
Revises: 0016_webhook_leases
"""

from payflow.db.migrations.statements import execute_all

revision = "0017_console"
down_revision = "0016_webhook_leases"
branch_labels = None
depends_on = None

UPGRADE: list[str] = []

DOWNGRADE: list[str] = []


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
