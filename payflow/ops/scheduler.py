"""The scheduler role and the job registry.

`JOBS` maps each job's name to its `JobSpec` (function, interval from settings, one-line
description): the operational checks and sweeps defined here, and the jobs each package
exports as its `JOBS` (ledger, payments, webhooks, chain, outbox), gathered in one place. Every
`SCHEDULER_INTERVAL_S` the scheduler starts each job that is due and
not still running in this process. Due-ness is decided in PostgreSQL, across replicas:
under a transaction-scoped advisory lock (PgBouncer-safe, no session state) a run is
claimed by inserting its `job_runs` row only when no run of the job started less than
its interval ago; the run's end, outcome and summary are written to the same row.
Jobs that write also take their own transaction-scoped job lock, so even a run by hand
(`payflow jobs run`) never overlaps a scheduled one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import structlog
from redis.asyncio import Redis

from payflow.alerts import AlertSink, LogAlertSink
from payflow.chain.jobs import JOBS as CHAIN_JOBS
from payflow.config import DatabaseSettings, JobsSettings, Settings, SliceSource
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.errors import DRIVER_ERRORS, classify
from payflow.jobs.spec import JobContext, JobResult, JobSpec, Outcome
from payflow.ledger.jobs import JOBS as LEDGER_JOBS
from payflow.metrics import JOB_RUNS
from payflow.ops.checks import (
    check_dlq_growth,
    check_stuck_claims,
    check_zombies,
    cleanup_job_runs,
    recon_full,
    recon_hot,
)
from payflow.ops.dlq_drain import drain_redis_dlq
from payflow.ops.retention import cleanup_idempotency_keys_job
from payflow.outbox.maintenance import JOBS as OUTBOX_JOBS
from payflow.payments.jobs import JOBS as PAYMENT_JOBS
from payflow.webhooks.jobs import JOBS as WEBHOOK_JOBS

SQL = load_queries("payflow.ops")
log = structlog.get_logger("payflow.scheduler")

# Jobs of one replica running at once: they share the role's pool (with the workers in
# `payflow up`), so a burst of due jobs must not take every connection.
MAX_CONCURRENT_JOBS = 4


def _tick(settings: SliceSource) -> float:
    return settings.slice(JobsSettings).scheduler_interval_s


def _checks(settings: SliceSource) -> float:
    return settings.slice(JobsSettings).checks_interval_s


_SPECS: tuple[JobSpec, ...] = (
    JobSpec(
        "recon_hot",
        recon_hot,
        lambda s: s.slice(JobsSettings).recon_hot_interval_s,
        "balances of recently touched accounts = initial + Σ ledger",
    ),
    JobSpec(
        "recon_full",
        recon_full,
        lambda s: s.slice(JobsSettings).recon_full_interval_s,
        "every account, duplicate ledger rows, confirmed events without a ledger row",
    ),
    JobSpec("check_zombies", check_zombies, _checks, "events, payments, webhooks stuck too long"),
    JobSpec("check_dlq_growth", check_dlq_growth, _checks, "too many new dead letters"),
    JobSpec("check_stuck_claims", check_stuck_claims, _checks, "posting claims left pending"),
    *LEDGER_JOBS,
    *PAYMENT_JOBS,
    *WEBHOOK_JOBS,
    *OUTBOX_JOBS,
    JobSpec(
        "cleanup_idempotency_keys",
        cleanup_idempotency_keys_job,
        _tick,
        "retention of api_idempotency records",
    ),
    JobSpec("cleanup_job_runs", cleanup_job_runs, lambda s: 3600.0, "retention of job_runs"),
    JobSpec("drain_redis_dlq", drain_redis_dlq, _checks, "Redis DLQ fallback -> PostgreSQL"),
    *CHAIN_JOBS,
)
JOBS: dict[str, JobSpec] = {spec.name: spec for spec in _SPECS}


class UnknownJob(LookupError):
    """`payflow jobs run NAME` with a name that is not registered."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown job {name!r}; jobs: {', '.join(JOBS)}")


@dataclass(frozen=True, slots=True)
class JobRun:
    """One recorded run: its `job_runs` id, start and result (None when not due)."""

    run_id: int
    started_at: datetime
    result: JobResult


def _host() -> str:
    return socket.gethostname()[:200]


async def claim_run(
    pool: asyncpg.Pool, settings: SliceSource, spec: JobSpec, *, force: bool = False
) -> tuple[int, datetime] | None:
    """Claim a run of `spec`: insert its `job_runs` row when due (or `force`), under the
    job's transaction-scoped claim lock. Returns (run id, start) or None when another
    replica is claiming it right now or a run started less than its interval ago."""
    async with pool.acquire() as conn, transaction(conn, settings.slice(DatabaseSettings)):
        if not await conn.fetchval(SQL["try_job_claim_lock"], spec.name):
            return None
        row = await conn.fetchrow(
            SQL["claim_job_run"],
            spec.name,
            spec.interval_s(settings),
            _host(),
            os.getpid(),
            force,
        )
    return None if row is None else (int(row["id"]), row["started_at"])


async def execute_job(ctx: JobContext, spec: JobSpec, run_id: int) -> JobResult:
    """Run `spec` and record its end in `job_runs` row `run_id`; an exception becomes
    `Outcome.FAILED` with the error in the summary (never raised); counts
    `payflow_job_runs_total{job,outcome}`."""
    try:
        result = await spec.run(ctx)
    except Exception as exc:
        log.error("payflow.scheduler.job_failed", job=spec.name, error=f"{type(exc).__name__}")
        result = JobResult(Outcome.FAILED, f"{type(exc).__name__}: {exc}")
    JOB_RUNS.labels(spec.name, str(result.outcome)).inc()
    try:
        async with ctx.pool.acquire() as conn, transaction(conn, ctx.slice(DatabaseSettings)):
            await conn.execute(SQL["finish_job_run"], run_id, str(result.outcome), result.summary)
    except DRIVER_ERRORS as exc:  # a lost session: the run's row stays without an end
        log.error("payflow.scheduler.record_failed", job=spec.name, error=str(classify(exc))[:300])
    return result


async def run_job(ctx: JobContext, name: str, *, force: bool = True) -> JobRun | None:
    """Run job `name` now (by hand: `force` ignores its interval), recorded in
    `job_runs`. Raises `UnknownJob`; None when another run is being claimed right now."""
    spec = JOBS.get(name)
    if spec is None:
        raise UnknownJob(name)
    claimed = await claim_run(ctx.pool, ctx.settings, spec, force=force)
    if claimed is None:
        return None
    run_id, started_at = claimed
    return JobRun(run_id, started_at, await execute_job(ctx, spec, run_id))


class Scheduler:
    """Starts due jobs each tick, one task per job; a job still running in this process
    is not started again (across replicas the claim in `job_runs` decides)."""

    def __init__(self, ctx: JobContext, *, concurrency: int = MAX_CONCURRENT_JOBS) -> None:
        self.ctx = ctx
        self.running: dict[str, asyncio.Task[JobResult]] = {}
        self._slots = asyncio.Semaphore(concurrency)

    async def _execute(self, spec: JobSpec, run_id: int) -> JobResult:
        async with self._slots:
            return await execute_job(self.ctx, spec, run_id)

    async def tick(self) -> list[str]:
        """Claim and start every due job not already running here; returns their names."""
        started: list[str] = []
        for name, spec in JOBS.items():
            task = self.running.get(name)
            if task is not None and not task.done():
                continue
            try:
                claimed = await claim_run(self.ctx.pool, self.ctx.settings, spec)
            except Exception as exc:  # a lost session, or any bug: the next tick claims again
                log.error(
                    "payflow.scheduler.claim_failed",
                    job=name,
                    kind=type(classify(exc)).__name__,
                    error=str(classify(exc))[:300],
                )
                continue
            if claimed is not None:
                self.running[name] = asyncio.create_task(
                    self._execute(spec, claimed[0]), name=f"job:{name}"
                )
                started.append(name)
        return started

    async def drain(self) -> None:
        """Wait for every job started here to finish (graceful stop)."""
        await asyncio.gather(*self.running.values(), return_exceptions=True)


async def run_scheduler(
    pool: asyncpg.Pool,
    settings: Settings,
    stop: asyncio.Event,
    *,
    alerts: AlertSink | None = None,
    redis: Redis | None = None,
) -> None:
    """Tick every `scheduler_interval_s` until `stop` is set, then let running jobs end."""
    scheduler = Scheduler(
        JobContext(pool, settings, alerts if alerts is not None else LogAlertSink(), redis)
    )
    log.info("payflow.scheduler.started", jobs=list(JOBS))
    while not stop.is_set():
        await scheduler.tick()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=settings.scheduler_interval_s)
    await scheduler.drain()
    log.info("payflow.scheduler.stopped")
