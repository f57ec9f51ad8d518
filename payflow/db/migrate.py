"""Apply migrations (idempotently), creating the database first when it is missing;
step them down, refusing steps that would drop data unless forced."""

from __future__ import annotations

from importlib import resources
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError

from payflow.db.migrations.statements import DataLossRefused

__all__ = [
    "CommandError",
    "DataLossRefused",
    "admin_url",
    "database_name",
    "downgrade",
    "ensure_database",
    "script_directory",
    "upgrade",
]


def _alembic_config(database_url: str) -> Config:
    config = Config()
    location = resources.files("payflow.db").joinpath("migrations")
    config.set_main_option("script_location", str(location))
    scheme, rest = database_url.split("://", 1)
    config.set_main_option("sqlalchemy.url", "postgresql+asyncpg://" + rest)
    del scheme
    return config


def script_directory() -> ScriptDirectory:
    """The migration history (one linear chain of revisions, 0001 to the head)."""
    return ScriptDirectory.from_config(_alembic_config("postgresql://unused/unused"))


def database_name(database_url: str) -> str:
    """The database named in a postgres URL."""
    return urlsplit(database_url).path.lstrip("/")


def admin_url(database_url: str) -> str:
    """The same server, but the `postgres` maintenance database."""
    parts = urlsplit(database_url)
    return urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, parts.fragment))


async def ensure_database(database_url: str) -> bool:
    """Create the database named in `database_url` if absent; True when it was created."""
    name = database_name(database_url)
    conn = await asyncpg.connect(admin_url(database_url))
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if exists:
            return False
        quoted = '"' + name.replace('"', '""') + '"'
        try:
            await conn.execute(f"CREATE DATABASE {quoted}")
        except asyncpg.DuplicateDatabaseError:
            return False
        return True
    finally:
        await conn.close()


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the schema to `revision`; running it again changes nothing."""
    command.upgrade(_alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str, *, force: bool = False) -> None:
    """Take the schema down to `revision` (use "base" for an empty schema).

    Each step runs in its own transaction. A step that would drop data raises
    `DataLossRefused` unless `force` is True; that step rolls back, so the schema stays
    at the last revision that completed (earlier steps stay done). An unknown revision
    raises alembic's `CommandError`.
    """
    config = _alembic_config(database_url)
    config.attributes["force"] = force
    command.downgrade(config, revision)


def current_revision_sql() -> str:
    """SQL that reads the applied revision (for checks and tests)."""
    return "SELECT version_num FROM alembic_version"
