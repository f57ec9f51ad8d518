"""`payflow chaos`: load and faults together, then the drain and the verdict.

Phases: build the system (`system.py`); send the seeded plan while the seeded fault
schedule runs (and the supervisor restarts what dies); stop the faults; retry every
request that got no answer, with the same key; wait until quiet (`verdict.settled`);
judge. The figures go to the console; the last line is `key=value`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from rich.console import Console

from payflow_lab.bench.common import result_line
from payflow_lab.chaos.faults import FaultRunner, make_schedule
from payflow_lab.chaos.load import Client, Plan, make_plan
from payflow_lab.chaos.system import System, system
from payflow_lab.chaos.verdict import Verdict, judge, open_work

RESOLVE_LIMIT_S = 120.0
DRAIN_STUCK_S = 120.0  # the drain gives up when nothing moved for this long


@dataclass(frozen=True, slots=True)
class ChaosConfig:
    """What one chaos run does.

    `load_s`: the load is paced to last about this long (None: as fast as it goes, with
    the faults cycling until it ends); `drain_limit_s` bounds the wait for quiet."""

    events: int = 2000
    seed: int = 1
    load_s: float | None = 45.0
    concurrency: int = 16
    drain_limit_s: float = 1800.0
    accounts: int = 50
    log_dir: Path = Path("chaos-logs")
    keep: bool = False


@dataclass(frozen=True, slots=True)
class ChaosResult:
    """The verdict and the figures of the last line."""

    verdict: Verdict
    faults: Counter[str]
    fields: dict[str, object]

    @property
    def exactly_once(self) -> bool:
        return self.verdict.exactly_once


async def _tick(sys_: System, stop: asyncio.Event) -> None:
    """Restart what the faults (or anything else) killed, every 0.2 s, until `stop`."""
    while not stop.is_set():
        sys_.supervisor.tick()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.2)


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel `tasks` and wait until each has ended (their own errors are dropped)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _progress(console: Console, client: Client, faults: FaultRunner, every: float) -> None:
    """A line every `every` seconds while the load runs (long runs)."""
    started = time.monotonic()
    while True:
        await asyncio.sleep(every)
        c = client.counters
        console.print(
            f"  {time.monotonic() - started:.0f} s: {c.sent} attempts, {c.ok} answered 2xx, "
            f"{sum(faults.done.values())} faults"
        )


async def drain(
    database_url: str, plan: Plan, limit_s: float, console: Console | None = None
) -> float | None:
    """Seconds until quiet (`open_work` is 0), or None when `limit_s` passed first or
    nothing moved for `DRAIN_STUCK_S` (work that is stuck, not slow)."""
    started = last_move = time.monotonic()
    least: int | None = None
    while time.monotonic() - started < limit_s and time.monotonic() - last_move < DRAIN_STUCK_S:
        try:
            conn = await asyncpg.connect(database_url)
            try:
                left = await open_work(conn, plan)
            finally:
                await conn.close()
            if left == 0:
                return time.monotonic() - started
            if least is None or left < least:
                least, last_move = left, time.monotonic()
            if console is not None and int(time.monotonic() - started) % 30 == 0:
                console.print(f"  draining: {left} open after {time.monotonic() - started:.0f} s")
        except (OSError, asyncpg.PostgresError):
            pass
        await asyncio.sleep(1.0)
    return None


async def run_chaos(config: ChaosConfig, console: Console) -> ChaosResult:
    """One chaos run (see the module doc); raises only when the system cannot be built."""
    plan = make_plan(config.seed, config.events, config.accounts)
    rate = config.events / config.load_s if config.load_s else None
    horizon = config.load_s or config.events / 20.0  # faults cycle until the load ends
    schedule = make_schedule(config.seed, horizon)
    console.print(
        f"chaos: seed {config.seed}, {plan.requests} requests "
        f"({len(plan.of('payment'))} payments, {len(plan.of('deposit'))} deposits, "
        f"{len(plan.of('withdrawal'))} withdrawals), "
        f"rate {'max' if rate is None else f'{rate:.0f}/s'}, {len(schedule)} faults scheduled"
    )
    async with system(config.seed, config.log_dir, accounts=config.accounts, keep=config.keep) as s:
        console.print(f"system up: {', '.join(s.supervisor.procs)}; logs in {config.log_dir}")
        faults = FaultRunner(s.cluster, s.proxies, s.supervisor)
        stop_faults, stop_tick = asyncio.Event(), asyncio.Event()
        ticker = asyncio.create_task(_tick(s, stop_tick))
        background = [ticker]
        try:
            async with s.client(config.concurrency) as client:
                load_started = time.monotonic()
                fault_task = asyncio.create_task(faults.run(schedule, stop_faults))
                progress = asyncio.create_task(_progress(console, client, faults, 30.0))
                background += [fault_task, progress]
                await client.run(plan, rate)
                progress.cancel()
                load_s = time.monotonic() - load_started
                if config.load_s is not None:  # a paced run: let the whole schedule happen
                    await fault_task
                stop_faults.set()
                await fault_task
                console.print(
                    f"load done in {load_s:.1f} s; faults: {dict(sorted(faults.done.items()))}"
                )
                unresolved = await client.resolve(plan, RESOLVE_LIMIT_S)
            drain_s = await drain(s.direct_url, plan, config.drain_limit_s, console)
            stop_tick.set()
            await ticker
        finally:
            # Interrupted or not, nothing restarts a process or a service once the run
            # leaves this block: `system()` then stops them all.
            await _cancel(background)
        verdict = await judge(
            s.direct_url,
            s.redis,
            plan,
            [t.account_id for t in s.targets],
            "USD",
            s.gateway,
            faults.windows,
            s.recon_env,
            s.receiver.endpoint_ids,
        )
        return _report(console, s, plan, client, faults, verdict, drain_s, len(unresolved))


def print_verdict(console: Console, verdict: Verdict) -> None:
    """The dead letters, every count of the verdict, and its notes."""
    console.print(
        f"dead letters: {verdict.dlq_rows} {dict(verdict.dlq_by_source)}, "
        f"unexplained {verdict.dlq_unexplained}; {len(verdict.dlq_per_webhook)} dead "
        f"webhooks, at most {max(verdict.dlq_per_webhook.values(), default=0)} row(s) each"
    )
    console.print(
        f"verdict: lost {verdict.lost}, duplicated {verdict.duplicated}, refused "
        f"{verdict.refused}, wrong outcome {verdict.wrong_outcome}, balance mismatches "
        f"{verdict.balance_mismatches}, webhook both {verdict.webhook_both}, webhook wrong "
        f"{verdict.webhook_wrong}, recon {'clean' if verdict.recon_clean else 'DIRTY'}"
    )
    console.print(
        f"webhook endpoint: {verdict.endpoint_events} merchant events, "
        f"{verdict.endpoint_undelivered} not delivered, {verdict.endpoint_unseen} never "
        "received under their webhook-id"
    )
    for note in verdict.notes:
        console.print(f"  {note}", markup=False)


def _report(
    console: Console,
    s: System,
    plan: Plan,
    client: Client,
    faults: FaultRunner,
    verdict: Verdict,
    drain_s: float | None,
    unresolved: int,
) -> ChaosResult:
    c = client.counters
    provider_dupes = sum(op.deliveries - 1 for op in plan.of("deposit"))
    webhook_dupes = sum(max(0, n - 1) for n in s.receiver.answered_ok.values())
    endpoint_dupes = sum(max(0, n - 1) for n in s.receiver.endpoint_ids.values())
    console.print(
        f"client: {c.sent} HTTP attempts, {c.ok} 2xx, {c.status_5xx} 5xx, {c.dropped} dropped"
        f" or timed out, {c.retried_4xx} 409/429 retried; {c.parked} parked and retried after"
        f" the faults ({c.resolved_after} answered then, {unresolved} never)"
    )
    console.print(
        f"duplicates delivered: {provider_dupes} provider deposit redeliveries, "
        f"{webhook_dupes} webhooks answered 2xx more than once, {endpoint_dupes} endpoint "
        "events received more than once (at-least-once)"
    )
    restarts = {n: p.starts - 1 for n, p in s.supervisor.procs.items()}
    unplanned = {n: p.unplanned_exits for n, p in s.supervisor.procs.items() if p.unplanned_exits}
    console.print(
        f"process restarts: {restarts}; exits not caused by a fault: {unplanned or 'none'}"
    )
    if faults.errors:
        console.print(f"faults that failed to run: {faults.errors}")
    print_verdict(console, verdict)
    fields: dict[str, object] = {
        "events": plan.requests,
        "duplicates_delivered": provider_dupes + webhook_dupes + endpoint_dupes,
        "faults": sum(faults.done.values()),
        "lost": verdict.lost,
        "duplicated": verdict.duplicated,
        "recon": "clean" if verdict.recon_clean else "dirty",
        "endpoint_events": verdict.endpoint_events,
        "endpoint_undelivered": verdict.endpoint_undelivered + verdict.endpoint_unseen,
        "max_drain_s": "timeout" if drain_s is None else round(drain_s, 1),
        "exactly_once": "yes" if verdict.exactly_once and drain_s is not None else "no",
    }
    print(result_line(**fields), flush=True)
    return ChaosResult(verdict, faults.done, fields)
