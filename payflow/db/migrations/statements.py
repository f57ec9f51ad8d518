"""Helper for plain-SQL migrations: asyncpg prepares each statement, so a migration
is a list of single statements run in order (inside Alembic's transaction)."""

from collections.abc import Sequence

from alembic import op


def execute_all(statements: Sequence[str]) -> None:
    """Run each statement in order; the migration's transaction makes them atomic."""
    for statement in statements:
        op.execute(statement)
