"""Provider ingress: token registry per chain, provider id namespaces (issue 7).

Revision ID: 0005_ingress_tokens
Revises: 0004_pipeline
"""

from payflow.db.migrations.statements import execute_all

revision = "0005_ingress_tokens"
down_revision = "0004_pipeline"
branch_labels = None
depends_on = None

UPGRADE: list[str] = []

DOWNGRADE: list[str] = []


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
