"""The endpoint deliveries' maintenance jobs: the sweep that re-drives lost deliveries, and
the auto-disable of endpoints whose deliveries have all failed for days."""

from __future__ import annotations

import asyncpg
import structlog

from payflow.alerts import Severity
from payflow.broker.topology import TOPIC_ENDPOINT_DELIVER
from payflow.config import DatabaseSettings, JobsSettings, PipelineSettings, WebhookSettings
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.jobs.lock import job_lock
from payflow.jobs.spec import JobContext, JobResult, JobSpec, Outcome
from payflow.outbox.sweep import SWEEP_BATCH
from payflow.outbox.writer import enqueue
from payflow.webhooks.endpoints.dead import delivery_payload

SQL = load_queries("payflow.webhooks.endpoints")
log = structlog.get_logger("payflow.webhooks.endpoints")

ALERT_DISABLED = "webhooks.endpoint_disabled"


async def sweep_overdue_deliveries(
    pool: asyncpg.Pool, settings: PipelineSettings, *, database: DatabaseSettings
) -> int | None:
    """Re-announce `endpoint.deliver` for pending deliveries of enabled endpoints that no
    send or retry tier holds: expected back more than `WEBHOOK_SWEEP_AFTER_S` ago
    (doubling per sweep, capped at `SWEEP_MAX_BACKOFF_S`), no live lease, no unpublished
    outbox row for them. One transaction under the job's lock; returns how many were
    re-announced, None when another replica holds the lock."""
    async with pool.acquire() as conn, transaction(conn, database):
        if not await job_lock(conn, "sweep_endpoint_deliveries"):
            return None
        rows = await conn.fetch(
            SQL["overdue_deliveries"],
            settings.webhook_sweep_after_s,
            settings.sweep_max_backoff_s,
            SWEEP_BATCH,
        )
        for row in rows:
            await conn.fetchval(SQL["count_delivery_sweep"], row["id"])
            await enqueue(conn, TOPIC_ENDPOINT_DELIVER, delivery_payload(int(row["id"])))
    if rows:
        log.warning("payflow.webhooks.endpoints.swept", announced=len(rows))
    return len(rows)


async def sweep_endpoint_deliveries_job(ctx: JobContext) -> JobResult:
    """The scheduler job `sweep_endpoint_deliveries`."""
    announced = await sweep_overdue_deliveries(
        ctx.pool, ctx.slice(PipelineSettings), database=ctx.slice(DatabaseSettings)
    )
    if announced is None:
        return JobResult(Outcome.SKIPPED, "another replica holds the lock")
    return JobResult(Outcome.OK, f"announced={announced}")


async def disable_failing_endpoints(
    pool: asyncpg.Pool, settings: WebhookSettings, *, database: DatabaseSettings
) -> list[asyncpg.Record]:
    """Disable (reason `failing`) every enabled endpoint whose delivery attempts have all
    failed since more than `WEBHOOK_ENDPOINT_DISABLE_AFTER_DAYS` ago; returns the rows
    disabled (`id`, `merchant_id`, `url`, `failing_since`). Idempotent: a disabled
    endpoint is not touched again; re-enabling it (PATCH `enabled: true`) clears its
    failure streak."""
    async with pool.acquire() as conn, transaction(conn, database):
        if not await job_lock(conn, "disable_failing_endpoints"):
            return []
        return list(
            await conn.fetch(
                SQL["disable_failing_endpoints"], settings.webhook_endpoint_disable_after_days
            )
        )


async def disable_failing_endpoints_job(ctx: JobContext) -> JobResult:
    """The scheduler job `disable_failing_endpoints`; alert `webhooks.endpoint_disabled`
    for each endpoint it disables (the console shows the notice on the endpoint)."""
    settings = ctx.slice(WebhookSettings)
    disabled = await disable_failing_endpoints(
        ctx.pool, settings, database=ctx.slice(DatabaseSettings)
    )
    for row in disabled:
        log.warning(
            "payflow.webhooks.endpoints.disabled",
            endpoint_id=str(row["id"]),
            merchant_id=str(row["merchant_id"]),
        )
        await ctx.alerts.fire(
            f"{ALERT_DISABLED}:{row['id']}",
            Severity.WARNING,
            f"webhook endpoint {row['id']} of merchant {row['merchant_id']} disabled: every"
            f" delivery failed for {settings.webhook_endpoint_disable_after_days:g} days",
            details={"endpoint_id": str(row["id"]), "merchant_id": str(row["merchant_id"])},
        )
    if disabled:
        return JobResult(Outcome.ALERT, f"disabled={len(disabled)}")
    return JobResult(Outcome.OK, "disabled=0")


JOBS: tuple[JobSpec, ...] = (
    JobSpec(
        "sweep_endpoint_deliveries",
        sweep_endpoint_deliveries_job,
        lambda s: s.slice(JobsSettings).scheduler_interval_s,
        "re-announce lost webhook endpoint deliveries",
    ),
    JobSpec(
        "disable_failing_endpoints",
        disable_failing_endpoints_job,
        lambda s: s.slice(JobsSettings).scheduler_interval_s,
        "disable webhook endpoints whose deliveries all failed for days",
    ),
)
