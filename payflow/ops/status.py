"""`payflow status`: is the money right, and is it flowing?

One read-only look at PostgreSQL and RabbitMQ: the last reconciliation of each kind
(from `job_runs`), stuck posting claims, unresolved dead letters, zombies, outbox lag,
queue depths and open alerts. `Status.problems` names everything that is wrong; the
command exits 1 when it is not empty, so it serves as a health probe.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import asyncpg
from rich.console import Console
from rich.table import Table

from payflow.broker.depths import BrokerUnreachable, QueueDepth, queue_depths, unconsumed
from payflow.chain.payouts.wallet import stalled_counts
from payflow.config import ChainSettings, JobsSettings, Settings
from payflow.db import Connection
from payflow.db.pool import tool_pool
from payflow.db.queries import load_queries
from payflow.jobs.spec import JobContext, Outcome
from payflow.ops.checks import stuck_claim_count, zombie_counts
from payflow.ops.scheduler import JOBS

SQL = load_queries("payflow.ops")

RECON_JOBS: tuple[tuple[str, str], ...] = (("hot", "recon_hot"), ("full", "recon_full"))
# The chain's jobs whose last run failing (or alerting) is a problem while a chain is
# configured, and the alert key prefixes that are problems while open.
CHAIN_JOBS: tuple[str, ...] = ("chain_deposits", "recon_chain")
CHAIN_ALERT_PREFIXES: tuple[str, ...] = ("chain.node:", "chain.scanner_lag:")
ALERTS_SHOWN = 20
STALE_SLACK_S = 60.0


@dataclass(frozen=True, slots=True)
class ReconStatus:
    """The last finished (not skipped) run of one reconciliation `kind`: its outcome, age
    in seconds and summary (all None when it never ran), and the age beyond which it
    counts as too old (twice its interval plus a minute)."""

    kind: str
    outcome: str | None
    age_s: float | None
    summary: str | None
    max_age_s: float


@dataclass(slots=True)
class Status:
    """Everything `payflow status` shows; `problems` is empty when all is well."""

    recon: list[ReconStatus]
    stuck_claims: int
    dlq_unresolved: int
    zombies: dict[str, int]
    outbox_unpublished: int
    outbox_oldest_age_s: float | None
    broker: str  # "ok" or "unreachable: <reason>"
    queues: list[QueueDepth]
    alerts: list[dict[str, Any]] | None  # None: no `alerts` table yet
    # each configured chain's RPC circuit breaker: closed | open | half_open | unknown
    breakers: dict[str, str] = field(default_factory=dict)
    # one line per chain problem: a chain job's last run failed or alerted, an open
    # node alert (another network, a missing `finalized` tag), an open scanner lag alert
    chain: list[str] = field(default_factory=list)
    # open payouts that do not progress, per stall (unaccepted | unmined | nonce_taken)
    stalled_payouts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


async def _recon(conn: Connection, settings: Settings) -> list[ReconStatus]:
    out = []
    for kind, job in RECON_JOBS:
        row = await conn.fetchrow(SQL["last_finished_job_run"], job)
        max_age = 2 * JOBS[job].interval_s(settings) + STALE_SLACK_S
        if row is None:
            out.append(ReconStatus(kind, None, None, None, max_age))
        else:
            out.append(ReconStatus(kind, row["outcome"], row["age_s"], row["summary"], max_age))
    return out


async def _alerts(conn: Connection) -> list[dict[str, Any]] | None:
    if not await conn.fetchval(SQL["alerts_table"]):
        return None
    rows = await conn.fetch(SQL["open_alerts"], ALERTS_SHOWN)
    return [
        {
            "key": r["key"],
            "severity": str(r["severity"]),
            "message": r["message"],
            "first_seen": r["first_seen"].isoformat(),
            "last_seen": r["last_seen"].isoformat(),
            "count": int(r["count"]),
        }
        for r in rows
    ]


def judge(status: Status, settings: JobsSettings) -> list[str]:
    """The problems of `status`, one line each, naming what is wrong."""
    problems = []
    for recon in status.recon:
        name = f"recon {recon.kind}"
        if recon.outcome is None:
            problems.append(f"{name}: never run")
        elif recon.outcome == Outcome.ALERT:
            problems.append(f"{name}: MISMATCH ({recon.summary})")
        elif recon.outcome == Outcome.FAILED:
            problems.append(f"{name}: last run failed ({recon.summary})")
        elif recon.age_s is not None and recon.age_s > recon.max_age_s:
            problems.append(f"{name}: last run {recon.age_s:.0f} s ago (> {recon.max_age_s:g} s)")
    if status.stuck_claims:
        problems.append(f"stuck posting claims: {status.stuck_claims}")
    if status.dlq_unresolved > settings.status_dlq_max_unresolved:
        problems.append(
            f"dead letters unresolved: {status.dlq_unresolved}"
            f" (> {settings.status_dlq_max_unresolved})"
        )
    problems.extend(f"zombies {kind}: {n}" for kind, n in status.zombies.items() if n)
    lag = status.outbox_oldest_age_s
    if lag is not None and lag > settings.status_outbox_max_lag_s:
        problems.append(f"outbox lag: oldest unpublished row {lag:.0f} s old")
    if status.outbox_unpublished > settings.status_outbox_max_unpublished:
        problems.append(f"outbox unpublished: {status.outbox_unpublished}")
    if status.broker != "ok":
        problems.append(f"broker {status.broker}")
    problems.extend(
        f"queue missing: {q.name}"
        for q in status.queues
        if q.messages is None and q.kind != "feed"  # a feed not declared is as it should be
    )
    problems.extend(
        f"queue without consumer: {q.name} ({q.messages} messages waiting)"
        for q in unconsumed(status.queues)
    )
    problems.extend(
        f"rpc breaker {chain}: {state}"
        for chain, state in status.breakers.items()
        if state in ("open", "half_open")
    )
    problems.extend(status.chain)
    if status.stalled_payouts:
        counts = ", ".join(f"{n} {kind}" for kind, n in sorted(status.stalled_payouts.items()))
        problems.append(f"payouts stalled: {counts} (payflow payouts stalled)")
    return problems


async def _chain(conn: Connection, settings: ChainSettings) -> list[str]:
    """The chain's problems (see `Status.chain`); none when no chain is configured."""
    from payflow.chain.config import chain_configs

    if not chain_configs(settings):
        return []
    found = []
    for job in CHAIN_JOBS:
        row = await conn.fetchrow(SQL["last_finished_job_run"], job)
        if row is not None and row["outcome"] in (Outcome.FAILED, Outcome.ALERT):
            found.append(f"chain job {job}: last run {row['outcome']} ({row['summary']})")
    if await conn.fetchval(SQL["alerts_table"]):
        rows = await conn.fetch(SQL["open_alerts_with_prefix"], list(CHAIN_ALERT_PREFIXES))
        found.extend(f"{r['key']}: {r['message']}" for r in rows)
    return found


async def _breakers(settings: Settings) -> dict[str, str]:
    """The shared breaker state of every configured chain, read from Redis."""
    from redis.asyncio import Redis

    from payflow.chain.breaker import REDIS_ERRORS, Breaker, BreakerState
    from payflow.chain.config import chain_configs

    chains = chain_configs(settings)
    if not chains:
        return {}
    redis = Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=2)
    states: dict[str, str] = {}
    try:
        for chain in chains:
            try:
                await redis.ping()
            except REDIS_ERRORS:
                states[chain] = "unknown"
                continue
            state = await Breaker(chain, redis, prefix=settings.redis_key_prefix).state()
            states[chain] = BreakerState(state).name.lower()
    finally:
        await redis.aclose()
    return states


async def collect_status(pool: asyncpg.Pool, settings: Settings) -> Status:
    """Read everything `payflow status` shows (read-only) and judge it."""
    ctx = JobContext(pool, settings)
    async with pool.acquire() as conn:
        recon = await _recon(conn, settings)
        dlq_unresolved = int(await conn.fetchval(SQL["dead_letters_unresolved"]))
        outbox = await conn.fetchrow(SQL["outbox_lag"])
        alerts = await _alerts(conn)
        chain = await _chain(conn, settings.chain)
        stalled = await stalled_counts(conn, settings.payout_stuck_after_s)
    assert outbox is not None  # an aggregate always returns one row
    stuck, _examples = await stuck_claim_count(ctx)
    zombies = await zombie_counts(ctx)
    try:
        queues = await queue_depths(settings.broker, settings.status_broker_timeout_s)
        broker = "ok"
    except BrokerUnreachable as exc:
        queues, broker = [], f"unreachable: {exc}"
    status = Status(
        recon=recon,
        stuck_claims=stuck,
        dlq_unresolved=dlq_unresolved,
        zombies=zombies,
        outbox_unpublished=int(outbox["unpublished"]),
        outbox_oldest_age_s=outbox["oldest_age_s"],
        broker=broker,
        queues=queues,
        alerts=alerts,
        breakers=await _breakers(settings),
        chain=chain,
        stalled_payouts=stalled,
    )
    status.problems = judge(status, settings)
    return status


def to_json(status: Status) -> str:
    """The machine form: every field of `Status` plus `ok` (ages in seconds; no amounts)."""
    body = asdict(status)
    body["ok"] = status.ok
    return json.dumps(body, sort_keys=True)


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f} s"


def render(status: Status, console: Console) -> None:
    """The one screen: a table of checks, the queues and the open alerts."""
    table = Table(title="payflow status: is the money right, and is it flowing?")
    for column in ("check", "value", "state"):
        table.add_column(column, no_wrap=column != "value")

    def row(check: str, value: str, bad: bool) -> None:
        table.add_row(check, value, "[red]WRONG[/red]" if bad else "[green]ok[/green]")

    for r in status.recon:
        value = f"{r.outcome or 'never run'}, {_age(r.age_s)} ago: {r.summary or ''}"
        too_old = r.age_s is not None and r.age_s > r.max_age_s
        row(f"recon {r.kind}", value, r.outcome != Outcome.OK or too_old)
    row("stuck posting claims", str(status.stuck_claims), bool(status.stuck_claims))
    row("dead letters unresolved", str(status.dlq_unresolved), status.dlq_unresolved > 0)
    for kind, count in status.zombies.items():
        row(f"zombies {kind}", str(count), bool(count))
    row(
        "outbox unpublished / oldest",
        f"{status.outbox_unpublished} / {_age(status.outbox_oldest_age_s)}",
        any(p.startswith("outbox") for p in status.problems),
    )
    row("broker", status.broker, status.broker != "ok")
    idle = {q.name for q in unconsumed(status.queues)}
    for q in status.queues:
        if q.kind == "feed" and q.messages is None:
            continue  # an undeclared notification feed: nothing to show
        shown = "missing" if q.messages is None else f"{q.messages} ({q.consumers} consumers)"
        row(f"queue {q.name}", shown, q.messages is None or q.name in idle)
    for chain, state in status.breakers.items():
        row(f"rpc breaker {chain}", state, state in ("open", "half_open"))
    for line in status.chain:
        row("chain", line, True)
    stalled = ", ".join(f"{n} {k}" for k, n in sorted(status.stalled_payouts.items()))
    row("payouts stalled", stalled or "0", bool(status.stalled_payouts))
    console.print(table)
    if status.alerts is not None:
        for alert in status.alerts:
            console.print(
                f"alert {alert['severity']} {alert['key']}: {alert['message']}"
                f" (x{alert['count']}, last {alert['last_seen']})"
            )
        if not status.alerts:
            console.print("no open alerts")
    verdict = "OK" if status.ok else "WRONG: " + "; ".join(status.problems)
    console.print(verdict)


async def print_status(settings: Settings, *, as_json: bool) -> bool:
    """Collect and print the status (rich screen or `--json`); True when all is well."""
    async with tool_pool(settings.database) as pool:
        status = await collect_status(pool, settings)
    if as_json:
        print(to_json(status))
    else:
        render(status, Console(soft_wrap=True))
    return status.ok
