"""Shared benchmark plumbing: a throwaway database, percentiles, RSS and the result line."""

from __future__ import annotations

import asyncio
import resource
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from payflow.config import Settings
from payflow.db import migrate


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending sequence (0.0 when empty)."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def peak_rss_mb() -> float:
    """Peak resident set size of this process, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def result_line(**fields: object) -> str:
    """The machine-readable last line: space-separated key=value pairs."""
    return " ".join(f"{key}={value}" for key, value in fields.items())


def setup_url(settings: Settings, database_url: str) -> str:
    """The migration login (MIGRATION_DATABASE_URL) on `database_url`'s database: for
    set-up the service's role may not do (creating tables, VACUUM, bulk pre-fill)."""
    return migrate.with_database(settings.migration_url(), migrate.database_name(database_url))


@asynccontextmanager
async def bench_database(settings: Settings) -> AsyncIterator[str]:
    """A freshly migrated database beside DATABASE_URL's, dropped afterwards.

    Migrated like `payflow migrate` (roles, owner, grants); yields the URL of the
    service's role on it, so the benchmark measures the service with least privilege.
    """
    parts = urlsplit(settings.database_url)
    name = f"{parts.path.lstrip('/') or 'payflow'}_bench_{uuid.uuid4().hex[:8]}"
    url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))
    admin = setup_url(settings, url)
    try:
        await asyncio.to_thread(  # alembic runs its own event loop
            migrate.migrate_database,
            admin,
            owner=settings.db_owner_role,
            app=migrate.login_role(url),
            app_password=migrate.login_password(url),
        )
        yield url
    finally:
        conn = await asyncpg.connect(migrate.admin_url(admin))
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()
