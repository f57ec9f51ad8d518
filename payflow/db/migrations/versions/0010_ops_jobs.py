"""Operations: job runs (issue 9).

Revision ID: 0010_ops_jobs
Revises: 0009_roles
"""

from payflow.db.migrations.statements import execute_all

revision = "0010_ops_jobs"
down_revision = "0009_roles"
branch_labels = None
depends_on = None

UPGRADE: list[str] = []

DOWNGRADE: list[str] = []


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
