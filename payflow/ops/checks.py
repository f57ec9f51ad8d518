"""The scheduled money checks: reconciliation, zombies, DLQ growth, stuck
claims, and the retention of `job_runs`.

Each is a plain async job (`async def job(ctx) -> JobResult`, see `payflow.jobs.spec`),
read-only except `cleanup_job_runs`. A finding fires an alert through `ctx.alerts` and
returns `Outcome.ALERT`; a clean run resolves the alert and returns `Outcome.OK`, so an
alert stays open exactly as long as its condition.
"""

from __future__ import annotations

import time
from typing import Literal

import structlog

from payflow.alerts import Severity
from payflow.config import DatabaseSettings, JobsSettings, RetentionSettings
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.jobs.lock import job_lock
from payflow.jobs.spec import JobContext, JobResult, Outcome
from payflow.ledger.recon import ReconReport, reconcile
from payflow.metrics import RECON_LAST_SUCCESS, RECON_MISMATCHES, RECON_RUNS
from payflow.money import format_amount

SQL = load_queries("payflow.ops")
log = structlog.get_logger("payflow.ops")

ReconKind = Literal["hot", "full"]
ZOMBIE_KINDS: tuple[str, ...] = (
    "events_processing",
    "events_waiting",
    "payments_pending",
    "webhooks_undelivered",
)
EXAMPLES = 5
JOB_RUNS_BATCH = 5000
JOB_RUNS_MAX_BATCHES = 20


def recon_problems(report: ReconReport) -> int:
    """How many findings a reconciliation report holds (0 when clean)."""
    return (
        len(report.mismatches)
        + len(report.duplicate_ledger_events)
        + len(report.confirmed_without_ledger)
        + len(report.ledger_without_confirmation)
        + len(report.unbalanced_assets)
        + len(report.unbalanced_postings)
    )


def recon_summary(report: ReconReport) -> str:
    """One line: scope, accounts checked and the count of each kind of finding."""
    return (
        f"scope={report.scope} accounts={report.accounts_checked} "
        f"mismatches={len(report.mismatches)} duplicates={len(report.duplicate_ledger_events)} "
        f"confirmed_without_ledger={len(report.confirmed_without_ledger)} "
        f"ledger_without_confirmation={len(report.ledger_without_confirmation)}"
    )


async def _reconcile_job(ctx: JobContext, kind: ReconKind) -> JobResult:
    report = await reconcile(
        ctx.pool,
        ctx.slice(DatabaseSettings),
        full=kind == "full",
        recent_minutes=ctx.slice(JobsSettings).recon_recent_minutes,
    )
    problems = recon_problems(report)
    RECON_RUNS.labels(kind).inc()
    RECON_MISMATCHES.labels(kind).set(problems)
    summary = recon_summary(report)
    key = f"recon.mismatch:{kind}"
    if not problems:
        RECON_LAST_SUCCESS.labels(kind).set(time.time())
        await ctx.alerts.resolve(key)
        return JobResult(Outcome.OK, summary)
    details = {
        "accounts": [m.account_id for m in report.mismatches[:EXAMPLES]],
        # balances as strings: amounts never travel as floats
        "balances": [format_amount(m.balance) for m in report.mismatches[:EXAMPLES]],
        "expected": [format_amount(m.expected) for m in report.mismatches[:EXAMPLES]],
        "duplicate_ledger_events": report.duplicate_ledger_events[:EXAMPLES],
        "confirmed_without_ledger": report.confirmed_without_ledger[:EXAMPLES],
        "ledger_without_confirmation": report.ledger_without_confirmation[:EXAMPLES],
    }
    await ctx.alerts.fire(
        key, Severity.CRITICAL, f"{kind} reconciliation: {summary}", details=details
    )
    return JobResult(Outcome.ALERT, summary)


async def recon_hot(ctx: JobContext) -> JobResult:
    """Hot-path reconciliation: accounts with ledger rows in the last
    RECON_RECENT_MINUTES satisfy `balance = Σ journal` (one snapshot).

    Sets `payflow_recon_*{kind="hot"}`; a finding fires `recon.mismatch:hot` (critical).
    """
    return await _reconcile_job(ctx, "hot")


async def recon_full(ctx: JobContext) -> JobResult:
    """Full reconciliation: every account, duplicate ledger rows for one event, confirmed
    events without a ledger row and ledger rows of unconfirmed events (one snapshot).

    Sets `payflow_recon_*{kind="full"}`; a finding fires `recon.mismatch:full` (critical).
    """
    return await _reconcile_job(ctx, "full")


async def zombie_counts(ctx: JobContext) -> dict[str, int]:
    """Work that should have finished long ago, by kind (`ZOMBIE_KINDS`): ledger events
    `processing` > ZOMBIE_PROCESSING_S (since their last move), `pending`/`enqueued` >
    ZOMBIE_PENDING_S (since creation), payments `pending` > ZOMBIE_PAYMENT_PENDING_S, final
    payments' webhooks neither delivered nor dead-lettered > ZOMBIE_WEBHOOK_S."""
    s = ctx.slice(JobsSettings)
    async with ctx.pool.acquire() as conn:
        row = await conn.fetchrow(
            SQL["zombie_counts"],
            s.zombie_processing_s,
            s.zombie_pending_s,
            s.zombie_payment_pending_s,
            s.zombie_webhook_s,
        )
    assert row is not None  # one row of counts, always
    return {kind: int(row[kind]) for kind in ZOMBIE_KINDS}


async def check_zombies(ctx: JobContext) -> JobResult:
    """Fire `zombies:<kind>` (warning) for each kind of `zombie_counts` above 0 and
    resolve the others; `alert` when any fired."""
    counts = await zombie_counts(ctx)
    for kind, count in counts.items():
        key = f"zombies:{kind}"
        if count:
            await ctx.alerts.fire(
                key, Severity.WARNING, f"{count} zombie(s): {kind}", details={"count": count}
            )
        else:
            await ctx.alerts.resolve(key)
    summary = " ".join(f"{kind}={count}" for kind, count in counts.items())
    return JobResult(Outcome.ALERT if any(counts.values()) else Outcome.OK, summary)


async def check_dlq_growth(ctx: JobContext) -> JobResult:
    """Fire `dlq.growth` (warning) when more than DLQ_GROWTH_THRESHOLD dead letters were
    created in the last DLQ_GROWTH_WINDOW_S; resolve it otherwise."""
    s = ctx.slice(JobsSettings)
    async with ctx.pool.acquire() as conn:
        created = int(await conn.fetchval(SQL["dead_letters_created_since"], s.dlq_growth_window_s))
    summary = f"created={created} window_s={s.dlq_growth_window_s:g}"
    if created > s.dlq_growth_threshold:
        await ctx.alerts.fire(
            "dlq.growth",
            Severity.WARNING,
            f"{created} dead letters in the last {s.dlq_growth_window_s:g} s "
            f"(threshold {s.dlq_growth_threshold})",
            details={"created": created},
        )
        return JobResult(Outcome.ALERT, summary)
    await ctx.alerts.resolve("dlq.growth")
    return JobResult(Outcome.OK, summary)


async def stuck_claim_count(ctx: JobContext) -> tuple[int, list[str]]:
    """Posting claims still `pending` after STUCK_CLAIM_AFTER_S: (count, a few keys)."""
    async with ctx.pool.acquire() as conn:
        row = await conn.fetchrow(SQL["stuck_claims"], ctx.slice(JobsSettings).stuck_claim_after_s)
    assert row is not None  # an aggregate always returns one row
    return int(row["stuck"]), list(row["examples"] or [])


async def check_stuck_claims(ctx: JobContext) -> JobResult:
    """Fire `claims.stuck` (CRITICAL) for posting claims still `pending` after
    STUCK_CLAIM_AFTER_S. A claim and its outcome commit in one transaction, so any such
    row is an invariant break (and blocks its event's posting); resolve it otherwise."""
    stuck, examples = await stuck_claim_count(ctx)
    if stuck:
        after_s = ctx.slice(JobsSettings).stuck_claim_after_s
        await ctx.alerts.fire(
            "claims.stuck",
            Severity.CRITICAL,
            f"{stuck} posting claim(s) pending for over {after_s:g} s",
            details={"count": stuck, "examples": examples},
        )
        return JobResult(Outcome.ALERT, f"stuck={stuck} examples={','.join(examples)}")
    await ctx.alerts.resolve("claims.stuck")
    return JobResult(Outcome.OK, "stuck=0")


async def cleanup_job_runs(ctx: JobContext) -> JobResult:
    """Delete `job_runs` rows older than JOB_RUNS_RETENTION_DAYS, oldest first, in
    batches of 5,000 (each its own transaction under the job's lock), at most 20 per run."""
    s = ctx.slice(RetentionSettings)
    deleted = 0
    for _ in range(JOB_RUNS_MAX_BATCHES):
        async with ctx.pool.acquire() as conn, transaction(conn, ctx.slice(DatabaseSettings)):
            if not await job_lock(conn, "cleanup_job_runs"):
                if deleted:
                    break
                return JobResult(Outcome.SKIPPED, "another replica holds the lock")
            status = await conn.execute(
                SQL["delete_job_runs_before"], s.job_runs_retention_days * 86400, JOB_RUNS_BATCH
            )
        batch = int(status.split()[-1])
        deleted += batch
        if batch < JOB_RUNS_BATCH:
            break
    return JobResult(Outcome.OK, f"deleted={deleted}")
