"""Pipeline: database-side sweeps and relay back-off (issue 7).

Revision ID: 0007_pipeline_sweeps
Revises: 0006_charge_attempts
"""

from payflow.db.migrations.statements import execute_all

revision = "0007_pipeline_sweeps"
down_revision = "0006_charge_attempts"
branch_labels = None
depends_on = None

UPGRADE: list[str] = []

DOWNGRADE: list[str] = []


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
