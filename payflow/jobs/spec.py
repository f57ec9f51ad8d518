"""What every maintenance job receives and returns.

A job is a plain async function `async def job(ctx: JobContext) -> JobResult` that the
scheduler runs when it is due (a singleton per job across replicas, every run recorded
in `job_runs`) and `payflow jobs run NAME` runs by hand. A job never raises for a
finding: it returns `Outcome.ALERT` (and fires an alert through `ctx.alerts`); an
exception is recorded as `Outcome.FAILED` by whoever ran it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

import asyncpg
from redis.asyncio import Redis

from payflow.alerts import AlertSink, LogAlertSink
from payflow.config import Slice, SliceSource

S = TypeVar("S", bound=Slice)


class Outcome(StrEnum):
    """How one run ended; mirrored by the `job_runs_outcome_valid` CHECK."""

    OK = "ok"  # ran, nothing to report
    ALERT = "alert"  # ran and found something an operator must see (an alert fired)
    SKIPPED = "skipped"  # did not run: another replica holds the job's lock, or disabled
    FAILED = "failed"  # raised; the summary names the error


@dataclass(frozen=True, slots=True)
class JobContext:
    """The resources a job may use; built by the scheduler role or the CLI. `settings` is
    the root (the composition root builds the context); a job takes the slices it reads
    by class, `ctx.slice(RetentionSettings)`."""

    pool: asyncpg.Pool
    settings: SliceSource
    alerts: AlertSink = field(default_factory=LogAlertSink)
    redis: Redis | None = None

    def slice(self, kind: type[S]) -> S:
        """The settings slice of class `kind` (`settings.slice(kind)`)."""
        return self.settings.slice(kind)


@dataclass(frozen=True, slots=True)
class JobResult:
    """What one run did: `outcome` ok|alert|skipped|failed and a short human summary."""

    outcome: str
    summary: str = ""


JobFn = Callable[[JobContext], Awaitable[JobResult]]


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One registered job: its function, its interval in seconds (read from settings
    so that every interval is configurable) and a one-line description."""

    name: str
    run: JobFn
    interval: Callable[[SliceSource], float]
    description: str

    def interval_s(self, settings: SliceSource) -> float:
        """Seconds between two runs under `settings` (> 0)."""
        return float(self.interval(settings))
