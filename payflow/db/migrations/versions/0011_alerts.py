"""Operations: the alerts table (issue 9).

Revision ID: 0011_alerts
Revises: 0010_ops_jobs
"""

from payflow.db.migrations.statements import execute_all

revision = "0011_alerts"
down_revision = "0010_ops_jobs"
branch_labels = None
depends_on = None

UPGRADE: list[str] = []

DOWNGRADE: list[str] = []


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
