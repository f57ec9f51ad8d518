"""`payflow chaos --soak SECONDS`: the load held at half the measured capacity, no faults;
memory and latency sampled over time (docs/reliability.md, "Soak").

1. Capacity: the seeded load at full speed for `probe_s`, then until quiet; capacity is
   the operations answered divided by the time until the system was quiet (end to end,
   not just what the API accepts).
2. Soak: the load paced at half that for SECONDS. Every `sample_s` the RSS of every
   payflow process and the row counts of the bounded tables (outbox, processed_events,
   api_idempotency) are sampled, and the p99 latency of the requests answered in the window.
3. Report: per process, RSS growth from the first samples after warm-up (the first 20%
   of the soak, at least 30 s) to the last ones; p99 per window; the verdict of the soak's
   load after it drained. The outbox is kept for 36 s here (OUTBOX_RETENTION_HOURS=0.01)
   so its retention runs inside the soak; processed_events and api_idempotency keep
   days and hours by design (their floors), so they grow by the load over a short soak.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
from rich.console import Console

from payflow_lab.bench.common import percentile, result_line
from payflow_lab.chaos.load import Client, Plan, make_plan
from payflow_lab.chaos.run import _cancel, _tick, drain
from payflow_lab.chaos.system import System, system
from payflow_lab.chaos.verdict import judge

BOUNDED = ("outbox", "processed_events", "api_idempotency")
GROWTH_TARGET_PCT = 10.0


@dataclass(frozen=True, slots=True)
class SoakConfig:
    """What one soak does."""

    seconds: float
    seed: int = 1
    log_dir: Path = Path("chaos-logs")
    probe_s: float = 20.0
    sample_s: float = 10.0
    concurrency: int = 16


@dataclass
class Samples:
    """What the sampler saw: (t, rows per table) and (t, p99 ms, answered) per window."""

    rows: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    p99: list[tuple[float, float, int]] = field(default_factory=list)


def growth_pct(series: list[tuple[float, float]], warmup_s: float) -> float | None:
    """Growth (%) of a (t, value) series from the mean of its first three samples after
    `warmup_s` to the mean of its last three; None with fewer than six samples there."""
    after = [value for t, value in series if t >= warmup_s]
    if len(after) < 6:
        return None
    first, last = statistics.fmean(after[:3]), statistics.fmean(after[-3:])
    return (last - first) / first * 100.0


async def _capacity(
    s: System, client: Client, config: SoakConfig, console: Console
) -> tuple[float, Plan]:
    plan = make_plan(config.seed + 1, 1_000_000, len(s.targets))
    stop = asyncio.Event()
    started = time.monotonic()
    asyncio.get_running_loop().call_later(config.probe_s, stop.set)
    await client.run(plan, None, stop)
    await client.resolve(plan, 60.0)
    client.parked.clear()
    drained = await drain(s.direct_url, plan, 300.0)
    answered = sum(op.result is not None for op in plan.ops)
    elapsed = time.monotonic() - started
    capacity = answered / elapsed
    console.print(
        f"capacity: {answered} operations answered at full speed in {config.probe_s:.0f} s, "
        f"quiet after {elapsed:.1f} s (drain {drained}): {capacity:.1f} operations/s end to end"
    )
    return capacity, plan


async def _sample(
    s: System, plan: Plan, samples: Samples, started: float, every: float, stop: asyncio.Event
) -> None:
    conn = await asyncpg.connect(s.admin_url)
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=every)
            now = time.monotonic()
            t = now - started
            s.supervisor.sample_rss(t)
            rows = {
                table: await conn.fetchval(f"SELECT count(*) FROM {table}") for table in BOUNDED
            }
            samples.rows.append((t, rows))
            window = sorted(
                op.latency_ms
                for op in plan.ops
                if op.latency_ms is not None and now - every <= op.sent_at < now
            )
            samples.p99.append((t, percentile(window, 0.99), len(window)))
    finally:
        await conn.close()


async def run_soak(config: SoakConfig, console: Console) -> bool:
    """The soak (see the module doc); True when every process grew less than 10%."""
    async with system(config.seed, config.log_dir, OUTBOX_RETENTION_HOURS="0.01") as s:
        stop_tick = asyncio.Event()
        ticker = asyncio.create_task(_tick(s, stop_tick))
        background = [ticker]
        try:
            async with s.client(config.concurrency) as client:
                capacity, probe = await _capacity(s, client, config, console)
                rate = capacity / 2
                plan = make_plan(config.seed, int(rate * config.seconds * 1.2) + 50, len(s.targets))
                console.print(f"soak: {config.seconds:.0f} s at {rate:.1f} requests/s, no faults")
                samples = Samples()
                stop_load, stop_sampler = asyncio.Event(), asyncio.Event()
                started = time.monotonic()
                asyncio.get_running_loop().call_later(config.seconds, stop_load.set)
                sampler = asyncio.create_task(
                    _sample(s, plan, samples, started, config.sample_s, stop_sampler)
                )
                background.append(sampler)
                await client.run(plan, rate, stop_load)
                stop_sampler.set()
                await sampler
                await client.resolve(plan, 60.0)
            drain_s = await drain(s.direct_url, plan, 300.0)
            stop_tick.set()
            await ticker
        finally:
            await _cancel(background)  # nothing restarts anything once the run leaves
        sent = Plan([op for op in [*probe.ops, *plan.ops] if op.attempts], [])
        verdict = await judge(
            s.direct_url,
            s.redis,
            sent,
            [t.account_id for t in s.targets],
            "USD",
            s.gateway,
            [],
            s.recon_env,
            s.receiver.endpoint_ids,
        )
        return _report(console, s, config, rate, samples, verdict.exactly_once, drain_s)


def _report(
    console: Console,
    s: System,
    config: SoakConfig,
    rate: float,
    samples: Samples,
    exactly_once: bool,
    drain_s: float | None,
) -> bool:
    warmup = max(30.0, config.seconds * 0.2)
    growth: dict[str, float | None] = {}
    for name, proc in s.supervisor.procs.items():
        growth[name] = growth_pct(proc.rss_mb, warmup)
        series = ", ".join(
            f"{t:.0f}s {mb:.0f}" for t, mb in proc.rss_mb[:: max(1, len(proc.rss_mb) // 8)]
        )
        console.print(f"RSS MiB {name}: {series}; growth after warm-up {growth[name]}")
    for t, rows in samples.rows[:: max(1, len(samples.rows) // 10)]:
        console.print(f"rows at {t:.0f}s: {rows}")
    for t, p99, n in samples.p99[:: max(1, len(samples.p99) // 10)]:
        console.print(f"p99 at {t:.0f}s: {p99:.1f} ms over {n} requests")
    known = {name: g for name, g in growth.items() if g is not None}
    worst = max(known, key=lambda name: known[name]) if known else "none"
    after = [p99 for t, p99, _ in samples.p99 if t >= warmup]
    flat = bool(known) and all(g < GROWTH_TARGET_PCT for g in known.values())
    print(
        result_line(
            seconds=round(config.seconds),
            rate=round(rate, 1),
            rss_growth_max_pct=round(known[worst], 1) if known else "n/a",
            rss_growth_process=worst,
            p99_first_ms=round(after[0], 1) if after else "n/a",
            p99_last_ms=round(after[-1], 1) if after else "n/a",
            p99_max_ms=round(max(after), 1) if after else "n/a",
            outbox_rows_max=max((r["outbox"] for _, r in samples.rows), default=0),
            drain_s="timeout" if drain_s is None else round(drain_s, 1),
            exactly_once="yes" if exactly_once else "no",
            flat="yes" if flat else "no",
        ),
        flush=True,
    )
    return flat and exactly_once
