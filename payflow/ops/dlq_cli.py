"""Rich rendering of the DLQ for `payflow dlq list|show|replay`."""

from __future__ import annotations

import orjson
from rich.console import Console
from rich.table import Table

from payflow.config import DatabaseSettings
from payflow.db.pool import tool_pool
from payflow.dlq import get_dead_letter, list_dead_letters
from payflow.ops.dlq_replay import replay_dead_letter

out = Console(markup=False, highlight=False)  # stored text prints as is


async def print_list(settings: DatabaseSettings, *, include_resolved: bool, limit: int) -> None:
    """Print a table of dead letters."""
    async with tool_pool(settings) as pool:
        rows = await list_dead_letters(pool, include_resolved=include_resolved, limit=limit)
    table = Table(title=f"dead letters ({len(rows)})")
    for column in ("id", "source", "subject", "attempt", "error", "created", "resolution"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            str(row.id),
            row.source,
            row.subject_id,
            str(row.attempt),
            row.error[:60],
            row.created_at.isoformat(timespec="seconds"),
            f"{row.resolution} ({row.resolved_by})" if row.resolved_at else "-",
        )
    out.print(table)


async def print_one(settings: DatabaseSettings, dlq_id: int) -> None:
    """Print one dead letter with its payload."""
    async with tool_pool(settings) as pool:
        row = await get_dead_letter(pool, dlq_id)
    table = Table(show_header=False, title=f"dead letter {row.id}")
    table.add_column("field")
    table.add_column("value")
    for name in ("source", "subject_id", "attempt", "error", "created_at"):
        table.add_row(name, str(getattr(row, name)))
    table.add_row("payload", orjson.dumps(row.payload, option=orjson.OPT_INDENT_2).decode())
    table.add_row("resolved_at", str(row.resolved_at or "-"))
    table.add_row("resolved_by", row.resolved_by or "-")
    table.add_row("resolution", row.resolution or "-")
    out.print(table)


async def replay_one(
    settings: DatabaseSettings, dlq_id: int, operator: str, reason: str = ""
) -> None:
    """Replay one dead letter and print the recorded resolution (with the reason, if any)."""
    async with tool_pool(settings) as pool:
        resolution = await replay_dead_letter(
            pool, settings, dlq_id, operator=operator, reason=reason
        )
    out.print(f"dead letter {dlq_id}: {resolution} (by {operator})")
