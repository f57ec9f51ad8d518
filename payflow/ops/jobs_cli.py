"""`payflow jobs list` and `payflow jobs run NAME`: the registry and `job_runs` on screen."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg
from redis.asyncio import Redis
from rich.console import Console
from rich.table import Table

from payflow.alerts.build import build_alert_sink
from payflow.config import Settings
from payflow.db.pool import tool_pool
from payflow.db.queries import load_queries
from payflow.jobs.spec import JobContext, Outcome
from payflow.ops.scheduler import JOBS, JobRun, run_job

SQL = load_queries("payflow.ops")


@dataclass(frozen=True, slots=True)
class JobOverview:
    """One line of `payflow jobs list`: the job, its interval in seconds, its latest run
    (None when it never ran) and when it is next due (None: now)."""

    name: str
    interval_s: float
    description: str
    started_at: datetime | None
    outcome: str | None  # None while the latest run is still running
    summary: str
    next_due: datetime | None


async def job_overview(pool: asyncpg.Pool, settings: Settings) -> list[JobOverview]:
    """Every registered job with its latest run from `job_runs`, in registry order."""
    async with pool.acquire() as conn:
        rows = {r["job"]: r for r in await conn.fetch(SQL["last_job_runs"], list(JOBS))}
    overview = []
    for name, spec in JOBS.items():
        interval = spec.interval_s(settings)
        row = rows.get(name)
        started = row["started_at"] if row else None
        overview.append(
            JobOverview(
                name=name,
                interval_s=interval,
                description=spec.description,
                started_at=started,
                outcome=row["outcome"] if row else None,
                summary=row["summary"] if row else "",
                next_due=started + timedelta(seconds=interval) if started else None,
            )
        )
    return overview


def _when(value: datetime | None, empty: str) -> str:
    return value.isoformat(timespec="seconds") if value else empty


async def print_jobs(settings: Settings, console: Console) -> None:
    """Print the registry as a table: name, interval, last start, outcome, summary, next due."""
    async with tool_pool(settings.database) as pool:
        overview = await job_overview(pool, settings)
    table = Table(title="payflow jobs")
    for column in ("job", "interval", "last run", "outcome", "summary", "next due"):
        table.add_column(column, no_wrap=column != "summary")
    for job in overview:
        outcome = job.outcome or ("running" if job.started_at else "never")
        table.add_row(
            job.name,
            f"{job.interval_s:g} s",
            _when(job.started_at, "never"),
            outcome,
            job.summary or job.description,
            _when(job.next_due, "now"),
        )
    console.print(table)


async def run_by_hand(settings: Settings, name: str, console: Console) -> bool:
    """Run job `name` now, recorded in `job_runs`; print its result. True unless it
    failed. Raises `UnknownJob` for a name not in the registry."""
    redis = Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=5)
    try:
        async with tool_pool(settings.database) as pool:
            alerts = build_alert_sink(settings.alerts, pool, database=settings.database)
            run: JobRun | None = await run_job(JobContext(pool, settings, alerts, redis), name)
    finally:
        await redis.aclose()
    if run is None:
        console.print(f"{name}: skipped (another replica is claiming it right now)")
        return True
    console.print(f"{name}: {run.result.outcome} {run.result.summary}".rstrip())
    return run.result.outcome != Outcome.FAILED
