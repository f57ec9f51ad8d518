"""What every maintenance job receives (issue 9): a plain async function
`async def job(ctx: JobContext) -> JobResult` that the scheduler runs (a singleton per
job across replicas) and `payflow jobs run NAME` runs by hand."""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg
from redis.asyncio import Redis

from payflow.config import Settings
from payflow.ops.alerts import AlertSink, LogAlertSink


@dataclass(frozen=True, slots=True)
class JobContext:
    """The resources a job may use; built by the scheduler role or the CLI."""

    pool: asyncpg.Pool
    settings: Settings
    alerts: AlertSink = field(default_factory=LogAlertSink)
    redis: Redis | None = None


@dataclass(frozen=True, slots=True)
class JobResult:
    """What one run did: `outcome` ok|alert|skipped|failed and a short human summary."""

    outcome: str
    summary: str = ""
