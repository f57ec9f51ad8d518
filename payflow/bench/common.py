"""Shared benchmark plumbing: a throwaway database, percentiles, RSS and the result line."""

from __future__ import annotations

import asyncio
import resource
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg

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


@asynccontextmanager
async def bench_database(database_url: str) -> AsyncIterator[str]:
    """A freshly migrated database beside `database_url`, dropped afterwards."""
    parts = urlsplit(database_url)
    name = f"{parts.path.lstrip('/') or 'payflow'}_bench_{uuid.uuid4().hex[:8]}"
    url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))
    await migrate.ensure_database(url)
    try:
        await asyncio.to_thread(migrate.upgrade, url)  # alembic runs its own event loop
        yield url
    finally:
        conn = await asyncpg.connect(migrate.admin_url(url))
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()
