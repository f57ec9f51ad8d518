"""`payflow bench e2e`: the whole pipeline under load, with gateway delay 0 and a local sink.

The service runs as real processes (`payflow up`, plus optional extra workers) in a
throwaway database and a throwaway broker prefix. This process drives load through a
`Submitter` (direct service-layer writes today; the HTTP API once merged) in two
phases, one at a fixed rate and one at full speed, and receives the webhooks.

Latencies use the machine's one wall clock: accept = when the submission's commit
returned here; publish = the outbox row's `published_at` (clock_timestamp after the
confirm); terminal = `processed_at` (payments) or the confirming `updated_at`
(deposits); delivered = `webhook_delivered_at` (clock_timestamp after the 2xx).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import aio_pika
import asyncpg
import psutil
from rich.console import Console

from payflow.bench.common import bench_database, percentile, result_line
from payflow.bench.sink import WebhookSink
from payflow.bench.submit import DirectSubmitter, Submitter, create_merchant
from payflow.config import Settings
from payflow.db.pool import create_pool
from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account
from payflow.ledger.recon import reconcile

COMPLETION_LIMIT_S = 300.0
SUBMIT_CONCURRENCY = 32


@dataclass(frozen=True, slots=True)
class E2EConfig:
    """What `payflow bench e2e` runs."""

    payments: int = 2000
    rate: float = 200.0  # payments/s (and as many deposits/s) in the fixed-rate phase
    workers: int = 0  # extra `payflow worker` processes beside `payflow up`
    relays: int = 0  # extra `payflow relay` processes
    split: bool = False  # one process per role instead of `payflow up`


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """Throughput and latency samples (ms, ascending) of one phase."""

    name: str
    payments_per_s: float
    events_per_s: float
    publish_ms: list[float]
    terminal_ms: list[float]
    delivered_ms: list[float]

    def figures(self) -> dict[str, float]:
        """The printed figures, rounded."""

        def q(values: list[float], fraction: float) -> float:
            return round(percentile(values, fraction), 1)

        return {
            "events_per_s": round(self.events_per_s, 1),
            "payments_per_s": round(self.payments_per_s, 1),
            "publish_p50_ms": q(self.publish_ms, 0.50),
            "publish_p99_ms": q(self.publish_ms, 0.99),
            "terminal_p50_ms": q(self.terminal_ms, 0.50),
            "terminal_p99_ms": q(self.terminal_ms, 0.99),
            "delivered_p50_ms": q(self.delivered_ms, 0.50),
            "delivered_p99_ms": q(self.delivered_ms, 0.99),
        }


def _service_env(settings: Settings, database_url: str, prefix: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        RABBITMQ_URL=settings.rabbitmq_url,
        BROKER_PREFIX=prefix,
        GATEWAY_DELAY_MIN_S="0",
        GATEWAY_DELAY_MAX_S="0",
        GATEWAY_FAILURE_RATE="0",
        WEBHOOK_ALLOW_HOSTS="127.0.0.1",
        LOG_LEVEL=os.environ.get("BENCH_SERVICE_LOG_LEVEL", "WARNING"),
        RELAY_POLL_INTERVAL_S="1",
        BROKER_PREFETCH=str(settings.broker_prefetch),
    )
    return env


class Service:
    """The roles as OS processes, with their peak RSS sampled while they run."""

    def __init__(self, env: dict[str, str], config: E2EConfig, log_dir: Path) -> None:
        base = [["relay"], ["worker"], ["scheduler"]] if config.split else [["up"]]
        commands = base + [["worker"]] * config.workers + [["relay"]] * config.relays
        self._procs = []
        for index, args in enumerate(commands):
            log = (log_dir / f"{args[0]}-{index}.log").open("wb")
            self._procs.append(
                subprocess.Popen(  # noqa: S603 - our own interpreter and fixed arguments
                    [sys.executable, "-m", "payflow", *args],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        self.peak_rss_mb: dict[int, float] = {p.pid: 0.0 for p in self._procs}

        self.cpu_s: dict[int, float] = {p.pid: 0.0 for p in self._procs}

    def sample(self) -> None:
        """Record each process's RSS (keeping the peak) and CPU time."""
        for proc in self._procs:
            try:
                info = psutil.Process(proc.pid)
                rss = info.memory_info().rss / 2**20
                times = info.cpu_times()
            except psutil.Error:
                continue
            self.peak_rss_mb[proc.pid] = max(self.peak_rss_mb[proc.pid], rss)
            self.cpu_s[proc.pid] = times.user + times.system

    def alive(self) -> bool:
        """True while every service process runs."""
        return all(p.poll() is None for p in self._procs)

    def stop(self) -> list[int]:
        """SIGTERM every process and return their exit codes."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        return [proc.wait(timeout=60) for proc in self._procs]


def cpu_by_program() -> dict[str, float]:
    """CPU seconds used so far by PostgreSQL, RabbitMQ and everything else, machine-wide."""
    totals = {"postgres": 0.0, "rabbitmq": 0.0}
    for proc in psutil.process_iter(["name", "cpu_times"]):
        name = proc.info["name"] or ""
        times = proc.info["cpu_times"]
        if times is None:
            continue
        key = (
            "postgres"
            if name.startswith("postgres")
            else ("rabbitmq" if name.startswith("beam") else None)
        )
        if key is not None:
            totals[key] += times.user + times.system
    machine = psutil.cpu_times()
    totals["machine_busy"] = machine.user + machine.system + machine.nice
    totals["this_process"] = sum(psutil.Process().cpu_times()[:2])
    return totals


async def _submit_phase(
    submitter: Submitter,
    *,
    tag: str,
    merchant_id: uuid.UUID,
    accounts: list[uuid.UUID],
    count: int,
    rate: float | None,
    sink_url: str,
    accepted: dict[str, float],
) -> None:
    """Submit `count` payments and `count` deposits; paced at `rate` each, or flat out.

    `accepted` receives, per idempotency key / event id, when its commit returned."""
    gate = asyncio.Semaphore(SUBMIT_CONCURRENCY)
    started = time.monotonic()

    async def one(i: int) -> None:
        if rate is not None:
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        async with gate:
            await submitter.submit_payment(merchant_id, "1.25", "USD", f"{tag}-{i}", sink_url)
            accepted[f"{tag}-{i}"] = time.time()
            await submitter.submit_deposit(f"{tag}-dep-{i}", accounts[i % len(accounts)], "2.50")
            accepted[f"{tag}-dep-{i}"] = time.time()

    await asyncio.gather(*(one(i) for i in range(count)))


async def _wait_done(pool: asyncpg.Pool, tag: str, count: int, service: Service) -> None:
    deadline = time.monotonic() + COMPLETION_LIMIT_S
    while time.monotonic() < deadline:
        service.sample()
        if not service.alive():
            raise RuntimeError("a service process died; see its log")
        done = await pool.fetchval(
            "SELECT (SELECT count(*) FROM payments WHERE idempotency_key LIKE $1 || '-%'"
            "        AND webhook_delivered_at IS NOT NULL)"
            " + (SELECT count(*) FROM payment_events WHERE event_id LIKE $1 || '-dep-%'"
            "        AND status = 'confirmed')",
            tag,
        )
        if done >= 2 * count:
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"phase {tag} did not complete within {COMPLETION_LIMIT_S}s")


async def _measure(
    pool: asyncpg.Pool, tag: str, name: str, accepted: dict[str, float]
) -> PhaseResult:
    payments = await pool.fetch(
        """
        SELECT p.idempotency_key AS key,
               extract(epoch FROM o.published_at) AS published,
               extract(epoch FROM p.processed_at) AS terminal,
               extract(epoch FROM p.webhook_delivered_at) AS delivered
        FROM payments p
        JOIN outbox o ON o.topic = 'payment.created' AND o.payload->>'payment_id' = p.id::text
        WHERE p.idempotency_key LIKE $1 || '-%'
        """,
        tag,
    )
    deposits = await pool.fetch(
        """
        SELECT e.event_id AS key,
               extract(epoch FROM o.published_at) AS published,
               extract(epoch FROM e.updated_at) AS terminal
        FROM payment_events e
        JOIN outbox o ON o.topic = 'ledger.event' AND o.payload->>'event_id' = e.event_id
        WHERE e.event_id LIKE $1 || '-dep-%'
        """,
        tag,
    )

    def ms(rows: list[asyncpg.Record], column: str) -> list[float]:
        return sorted((float(r[column]) - accepted[r["key"]]) * 1000 for r in rows)

    first = min(accepted[r["key"]] for r in [*payments, *deposits])
    last_terminal = float(max(r["terminal"] for r in [*payments, *deposits]))
    last_delivered = float(max(r["delivered"] for r in payments))
    window = max(last_terminal, last_delivered) - first
    return PhaseResult(
        name=name,
        payments_per_s=len(payments) / max(last_delivered - first, 1e-6),
        events_per_s=(len(payments) + len(deposits)) / max(window, 1e-6),
        publish_ms=ms([*payments, *deposits], "published"),
        terminal_ms=ms([*payments, *deposits], "terminal"),
        delivered_ms=ms(payments, "delivered"),
    )


async def _exactly_once(
    pool: asyncpg.Pool, settings: Settings, sink: WebhookSink, total_payments: int
) -> tuple[bool, bool]:
    ledger_rows = await pool.fetchval("SELECT count(*) FROM balance_events")
    duplicates = await pool.fetchval(
        "SELECT count(*) FROM (SELECT source_event_id FROM balance_events"
        " GROUP BY source_event_id HAVING count(*) > 1) d"
    )
    merchant_balance: Decimal = await pool.fetchval(
        "SELECT coalesce(sum(balance), 0) FROM accounts WHERE merchant_id IS NOT NULL"
    )
    ids = [r.headers.get("webhook-id") for r in sink.received]
    once = (
        ledger_rows == 2 * total_payments
        and duplicates == 0
        and merchant_balance == Decimal("1.25") * total_payments
        and len(set(ids)) == total_payments
        and len(ids) == total_payments
    )
    clean = (await reconcile(pool, settings, full=True)).clean
    return once, clean


async def _cleanup_broker(settings: Settings, prefix: str) -> None:
    connection = await aio_pika.connect(settings.rabbitmq_url)
    try:
        channel = await connection.channel()
        for short in ("payments", "ledger", "webhooks", "notifications"):
            names = [f"{prefix}.{short}", f"{prefix}.{short}.dlq"]
            names += [f"{prefix}.{short}.retry.{t}ms" for t in settings.retry_tiers_ms]
            for name in names:
                await channel.queue_delete(name)
        for exchange in (prefix, f"{prefix}.retry", f"{prefix}.dlx"):
            await channel.exchange_delete(exchange)
    finally:
        await connection.close()


async def run_e2e_bench(settings: Settings, config: E2EConfig, log_dir: Path) -> bool:
    """Run both phases; print figures and the machine-readable last line.

    Returns True when exactly-once was verified and reconciliation is clean.
    """
    console = Console(soft_wrap=True)
    prefix = f"bench_{uuid.uuid4().hex[:8]}"
    sink = WebhookSink(keep_bodies=False)
    await sink.start()
    async with bench_database(settings.database_url) as url:
        bench_settings = settings.model_copy(update={"database_url": url})
        pool = await create_pool(bench_settings, min_size=4, max_size=SUBMIT_CONCURRENCY + 4)
        service = Service(_service_env(settings, url, prefix), config, log_dir)
        try:
            async with pool.acquire() as conn, transaction(conn, bench_settings):
                merchant_id, _secret = await create_merchant(conn, "bench")
                accounts = [(await create_account(conn, "USD")).id for _ in range(100)]
            submitter: Submitter = DirectSubmitter(pool, bench_settings)
            await asyncio.sleep(2.0)  # let the processes declare the topology
            # Warm-up: connections, prepared statements, the merchant account.
            accepted: dict[str, float] = {}
            await _submit_phase(
                submitter,
                accepted=accepted,
                tag="warm",
                merchant_id=merchant_id,
                accounts=accounts,
                count=50,
                rate=None,
                sink_url=sink.url,
            )
            await _wait_done(pool, "warm", 50, service)
            results = []
            cpu_before = cpu_by_program()
            wall_before = time.monotonic()
            for tag, name, rate in (
                ("fixed", f"fixed rate {config.rate:g}/s", config.rate),
                ("full", "full speed", None),
            ):
                await _submit_phase(
                    submitter,
                    accepted=accepted,
                    tag=tag,
                    merchant_id=merchant_id,
                    accounts=accounts,
                    count=config.payments,
                    rate=rate,
                    sink_url=sink.url,
                )
                await _wait_done(pool, tag, config.payments, service)
                results.append(await _measure(pool, tag, name, accepted))
            service.sample()
            cpu_after = cpu_by_program()
            wall = time.monotonic() - wall_before
            once, clean = await _exactly_once(pool, bench_settings, sink, 2 * config.payments + 50)
        finally:
            exit_codes = service.stop()
            await pool.close()
            await sink.stop()
            await _cleanup_broker(settings, prefix)
    rss = max(service.peak_rss_mb.values())
    for result in results:
        console.print(
            f"[bold]{result.name}[/bold]: {config.payments} payments + {config.payments} deposits"
        )
        for key, value in result.figures().items():
            console.print(f"  {key:<18} {value}")
    console.print(
        f"processes: {'relay + worker + scheduler' if config.split else 'up'}"
        f" + {config.workers} worker + {config.relays} relay; "
        f"peak RSS per process (MB): "
        f"{', '.join(f'{v:.0f}' for v in service.peak_rss_mb.values())}; "
        f"exit codes {exit_codes}"
    )
    cpu = {k: (cpu_after[k] - cpu_before[k]) / wall for k in cpu_after}
    console.print(
        "CPU during the phases (cores busy): "
        f"machine {cpu['machine_busy']:.2f} of {psutil.cpu_count()}, "
        f"postgres {cpu['postgres']:.2f}, rabbitmq {cpu['rabbitmq']:.2f}, "
        f"bench driver+sink {cpu['this_process']:.2f}, "
        f"payflow processes (whole run) {sum(service.cpu_s.values()) / wall:.2f}"
    )
    console.print(
        f"exactly-once verified: {'yes' if once else 'no'}; "
        f"reconciliation: {'clean' if clean else 'dirty'}"
    )
    fixed, full = results
    print(
        result_line(
            events_per_s=round(full.events_per_s, 1),
            payments_per_s=round(full.payments_per_s, 1),
            publish_p50_ms=fixed.figures()["publish_p50_ms"],
            terminal_p99_ms=fixed.figures()["terminal_p99_ms"],
            delivered_p99_ms=fixed.figures()["delivered_p99_ms"],
            exactly_once="yes" if once else "no",
            recon="clean" if clean else "dirty",
            rss_mb=round(rss, 1),
        )
    )
    return once and clean
