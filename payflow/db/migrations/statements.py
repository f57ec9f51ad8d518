"""Helper for plain-SQL migrations: asyncpg prepares each statement, so a migration
is a list of single statements run in order (inside Alembic's transaction)."""

from collections.abc import Sequence

from alembic import op


def execute_all(statements: Sequence[str]) -> None:
    """Run each statement in order; the migration's transaction makes them atomic."""
    for statement in statements:
        op.execute(statement)


class DataLossRefused(RuntimeError):
    """A downgrade step would destroy data and the run was not forced."""


def refuse_data_loss(check_sql: str, what: str) -> None:
    """Stop a downgrade that would destroy data, unless the run was forced.

    `check_sql` is one SELECT returning a boolean: true when the data that the downgrade
    would drop exists. Forcing is `payflow.db.migrate.downgrade(..., force=True)` (the
    CLI's `--force`), which sets the Alembic config attribute ``force``.
    Raises `DataLossRefused` (a `RuntimeError`) naming `what` otherwise.
    """
    from alembic import context
    from sqlalchemy import text

    if context.config.attributes.get("force"):
        return
    if op.get_bind().execute(text(check_sql)).scalar():
        raise DataLossRefused(
            f"downgrade refused: it would lose data ({what}); rerun with --force to accept"
        )
