"""Payments: charge attempts claimed before the gateway is called (issue 7).

Revision ID: 0006_charge_attempts
Revises: 0005_ingress_tokens
"""

from payflow.db.migrations.statements import execute_all

revision = "0006_charge_attempts"
down_revision = "0005_ingress_tokens"
branch_labels = None
depends_on = None

UPGRADE: list[str] = []

DOWNGRADE: list[str] = []


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
