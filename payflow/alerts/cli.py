"""Rich rendering of the `alerts` table for `payflow alerts list|ack`."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table

from payflow.alerts.store import AlertRow, AlertStore
from payflow.config import AlertSettings, DatabaseSettings
from payflow.db.pool import tool_pool

out = Console()


def _age(at: datetime, now: datetime) -> str:
    seconds = max(0, int((now - at).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def render(rows: list[AlertRow], *, now: datetime | None = None) -> Table:
    """A table of incidents: key, severity, count, first/last seen ages, state, message."""
    now = now or datetime.now(UTC)
    table = Table(title=f"alerts ({len(rows)})")
    for column in ("key", "severity", "count", "first seen", "last seen", "state", "message"):
        table.add_column(column)
    for row in rows:
        if row.resolved_at is not None:
            state = f"resolved {_age(row.resolved_at, now)} ago"
        elif row.acknowledged_at is not None:
            state = f"acknowledged by {row.acknowledged_by}"
        else:
            state = "open"
        table.add_row(
            row.key,
            row.severity.value,
            str(row.count),
            _age(row.first_seen, now),
            _age(row.last_seen, now),
            state,
            row.message[:80],
        )
    return table


async def print_list(
    settings: AlertSettings, *, database: DatabaseSettings, include_resolved: bool, limit: int
) -> None:
    """Print open alerts (with `include_resolved`, closed ones too)."""
    async with tool_pool(database) as pool:
        rows = await AlertStore(pool, settings, database=database).list(
            include_resolved=include_resolved, limit=limit
        )
    out.print(render(rows))


async def acknowledge(
    settings: AlertSettings, key: str, operator: str, *, database: DatabaseSettings
) -> AlertRow | None:
    """Acknowledge the open alert `key` as `operator`; None when no alert `key` is open."""
    async with tool_pool(database) as pool:
        return await AlertStore(pool, settings, database=database).acknowledge(key, operator)
