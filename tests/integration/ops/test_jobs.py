"""Every scheduled job on a clean database (nothing to do) and the scheduler's claims."""

from __future__ import annotations

import asyncio

import asyncpg
from redis.asyncio import Redis

from payflow.alerts.build import build_alert_sink
from payflow.config import Settings
from payflow.jobs.spec import JobContext, JobResult, JobSpec, Outcome
from payflow.ops.scheduler import (
    JOBS,
    Scheduler,
    claim_run,
    execute_job,
    run_job,
    run_scheduler,
)
from tests.integration.ops.conftest import RecordingSink


async def test_every_job_does_nothing_on_a_clean_database(
    ctx: JobContext, pool: asyncpg.Pool, sink: RecordingSink
) -> None:
    for name in JOBS:
        run = await run_job(ctx, name)
        assert run is not None
        assert run.result.outcome == Outcome.OK, (name, run.result)
    assert sink.fired == []
    rows = await pool.fetch("SELECT job, outcome, finished_at, host, pid FROM job_runs")
    assert sorted(r["job"] for r in rows) == sorted(JOBS)
    assert {r["outcome"] for r in rows} == {"ok"}
    assert all(r["finished_at"] is not None and r["pid"] > 0 and r["host"] for r in rows)
    # Nothing else changed: no outbox row, no dead letter, no claim deleted or written.
    for table in ("outbox", "dead_letter_queue", "processed_events", "balance_events"):
        assert await pool.fetchval(f"SELECT count(*) FROM {table}") == 0


async def test_replicas_run_each_due_job_once_and_not_again_before_its_interval(
    pool: asyncpg.Pool, settings: Settings, redis: Redis
) -> None:
    replicas = [Scheduler(JobContext(pool, settings, RecordingSink(), redis)) for _ in range(3)]
    started = await asyncio.gather(*(r.tick() for r in replicas))
    for replica in replicas:
        await replica.drain()
    assert sorted(name for names in started for name in names) == sorted(JOBS)
    assert await pool.fetchval("SELECT count(*) FROM job_runs") == len(JOBS)
    # Nothing is due right after: the last run decides, on every replica.
    assert [await r.tick() for r in replicas] == [[], [], []]
    # Two minutes later the tick jobs, the checks and the hot reconciliation are due
    # again; the daily full and chain reconciliations and the hourly job_runs retention
    # are not.
    await pool.execute("UPDATE job_runs SET started_at = started_at - interval '2 minutes'")
    again = await replicas[0].tick()
    await replicas[0].drain()
    assert sorted(again) == sorted(set(JOBS) - {"recon_full", "recon_chain", "cleanup_job_runs"})
    counts = dict(await pool.fetch("SELECT job, count(*) FROM job_runs GROUP BY job"))
    assert counts["recon_full"] == 1
    assert counts["recon_hot"] == 2


async def test_a_job_that_raises_is_recorded_as_failed(
    pool: asyncpg.Pool, settings: Settings, redis: Redis
) -> None:
    async def broken(ctx: JobContext) -> JobResult:
        raise RuntimeError("disk on fire")

    spec = JobSpec("broken", broken, lambda s: 60.0, "raises")
    claimed = await claim_run(pool, settings, spec)
    assert claimed is not None
    result = await execute_job(JobContext(pool, settings, RecordingSink(), redis), spec, claimed[0])
    assert result == JobResult(Outcome.FAILED, "RuntimeError: disk on fire")
    row = await pool.fetchrow("SELECT outcome, summary, finished_at FROM job_runs")
    assert (row["outcome"], row["summary"]) == ("failed", "RuntimeError: disk on fire")
    assert row["finished_at"] is not None
    assert await claim_run(pool, settings, spec) is None  # not due again for 60 s
    assert await claim_run(pool, settings, spec, force=True) is not None  # by hand


async def test_job_runs_retention_keeps_the_last_week(ctx: JobContext, pool: asyncpg.Pool) -> None:
    await pool.execute(
        "INSERT INTO job_runs (job, started_at, finished_at, outcome)"
        " SELECT 'x', now() - make_interval(days => d), now(), 'ok'"
        " FROM generate_series(1, 10) AS d"
    )
    run = await run_job(ctx, "cleanup_job_runs")
    assert run is not None and run.result == JobResult(Outcome.OK, "deleted=4")
    ages = [r[0] for r in await pool.fetch("SELECT started_at FROM job_runs WHERE job = 'x'")]
    assert len(ages) == 6  # days 1..6 kept; 7..10 past JOB_RUNS_RETENTION_DAYS=7


async def test_the_scheduler_role_runs_due_jobs_and_finishes_them_on_stop(
    pool: asyncpg.Pool, settings: Settings, redis: Redis
) -> None:
    fast = settings.model_copy(update={"scheduler_interval_s": 0.2})
    stop = asyncio.Event()
    task = asyncio.create_task(run_scheduler(pool, fast, stop, alerts=RecordingSink(), redis=redis))
    deadline = asyncio.get_running_loop().time() + 30
    while (
        await pool.fetchval("SELECT count(*) FROM job_runs WHERE job = 'recover_stale_events'") < 2
    ):
        assert asyncio.get_running_loop().time() < deadline, "the scheduler did not tick twice"
        await asyncio.sleep(0.1)
    stop.set()
    await asyncio.wait_for(task, timeout=30)
    counts = dict(await pool.fetch("SELECT job, count(*) FROM job_runs GROUP BY job"))
    assert set(counts) == set(JOBS)
    assert counts["recon_full"] == counts["recon_hot"] == counts["cleanup_job_runs"] == 1
    # Every run the scheduler started has finished and was recorded before it returned.
    assert await pool.fetchval("SELECT count(*) FROM job_runs WHERE finished_at IS NULL") == 0
    assert {r[0] for r in await pool.fetch("SELECT DISTINCT outcome FROM job_runs")} == {"ok"}


async def test_the_scheduler_role_records_alerts_through_its_real_sink(
    pool: asyncpg.Pool, settings: Settings, redis: Redis
) -> None:
    """A sink that remembers no key yet has len() 0 and is falsy, and the role still uses
    it, not the log sink in its place: the alerts table is written, and delivery, cooldown
    and acknowledgement apply."""
    sink = build_alert_sink(settings, pool, database=settings)
    assert len(sink) == 0  # the case that was taken for "no sink"
    await pool.execute(
        "INSERT INTO dead_letter_queue (source, subject_id, error, attempt)"
        " SELECT 'webhook', 's' || n, 'boom', 1 FROM generate_series(1, $1) AS n",
        settings.dlq_growth_threshold + 1,
    )
    fast = settings.model_copy(update={"scheduler_interval_s": 0.2})
    stop = asyncio.Event()
    task = asyncio.create_task(run_scheduler(pool, fast, stop, alerts=sink, redis=redis))
    deadline = asyncio.get_running_loop().time() + 30
    while not await pool.fetchval("SELECT count(*) FROM alerts WHERE key = 'dlq.growth'"):
        assert asyncio.get_running_loop().time() < deadline, "no dlq.growth row in alerts"
        await asyncio.sleep(0.1)
    stop.set()
    await asyncio.wait_for(task, timeout=30)
    assert len(sink) >= 1
