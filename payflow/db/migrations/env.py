"""Alembic environment: plain-SQL migrations run over SQLAlchemy's asyncpg dialect.

The URL comes from the Alembic config (`payflow.db.migrate` sets it). An advisory
lock serialises concurrent `payflow migrate` runs against one database. When the
config attribute ``owner_role`` is set, the session runs `SET ROLE` to it first, so
every object a migration creates is owned by the owner role, never by the login.
"""

import asyncio
from typing import Any

from alembic import context
from sqlalchemy import pool, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

MIGRATION_LOCK_KEY = 7_240_001


def _run(connection: Connection) -> None:
    owner = context.config.attributes.get("owner_role")
    if owner:
        quoted = '"' + str(owner).replace('"', '""') + '"'
        connection.execute(text(f"SET ROLE {quoted}"))
        connection.commit()
    # A downgrade runs as ONE transaction: a step that refuses (DataLossRefused) or
    # fails rolls back every step before it, so a refused `payflow migrate --downgrade`
    # leaves the schema exactly where it was, never half-way down under a running
    # service. Upgrades commit per migration.
    atomic = bool(context.config.attributes.get("atomic"))
    context.configure(
        connection=connection, target_metadata=None, transaction_per_migration=not atomic
    )
    connection.execute(text(f"SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})"))
    connection.commit()
    try:
        _repair_two_heads(connection)
        if atomic:
            with context.begin_transaction():
                context.run_migrations()
        else:
            context.run_migrations()
    except BaseException:
        if connection.in_transaction():
            connection.rollback()
        raise
    finally:
        connection.execute(text(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})"))
        connection.commit()


def _repair_two_heads(connection: Connection) -> None:
    """Databases migrated before 0004 was re-parented onto 0003 carry both 0003 and
    0004 as heads; 0004 now descends from 0003, so the 0003 row is redundant.

    A database that was taken to the old 0004 alone (0001, 0002, 0004; e.g. by
    `alembic upgrade 0004_pipeline`) never ran 0003, although the new history says it
    did: its 0003 tables are created here, so the chain above 0004 finds them."""
    if connection.execute(text("SELECT to_regclass('alembic_version')")).scalar() is None:
        return
    connection.execute(
        text(
            "DELETE FROM alembic_version WHERE version_num = '0003_api'"
            " AND EXISTS (SELECT 1 FROM alembic_version WHERE version_num <> '0003_api')"
        )
    )
    versions = {
        row[0] for row in connection.execute(text("SELECT version_num FROM alembic_version"))
    }
    missing_0003 = (
        connection.execute(text("SELECT to_regclass('api_idempotency')")).scalar() is None
    )
    if versions == {"0004_pipeline"} and missing_0003:
        for statement in _revision_module("0003_api").UPGRADE:
            connection.execute(text(statement))
    connection.commit()


def _revision_module(revision: str) -> Any:
    """The migration module of `revision` (its file name starts with a digit)."""
    script = context.script.get_revision(revision)
    assert script is not None and script.module is not None
    return script.module


async def _run_online() -> None:
    url = context.config.get_main_option("sqlalchemy.url")
    assert url is not None
    engine = create_async_engine(url, poolclass=pool.NullPool)
    async with engine.connect() as connection:
        await connection.run_sync(_run)
    await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("payflow migrations run online only")
asyncio.run(_run_online())
