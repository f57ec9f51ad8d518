"""`payflow bench webhooks`: webhook deliveries/s of the real sender against a bare httpx
loop, with a receiver answering at once and one answering after a delay, in one run.

The sender path is `WebhookSender.handle` as the worker calls it (claim the lease in one
short transaction, sign, SSRF-check and POST with no transaction open, record in a second
short transaction), driven straight from this process for N final payments on a filled,
VACUUM ANALYZEd `payments` table; the broker is left out (`bench e2e` has it). The bare
loop POSTs the same body N times with the same concurrency (`WEBHOOK_MAX_IN_FLIGHT`) over
httpx's best pool layout for many connections (`payflow_lab.bench.httpx_shards`) and does
nothing else. The receiver is
`WebhookSink` in its own process, so its CPU is not this process's.
"""

from __future__ import annotations

import asyncio
import resource
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
import asyncpg
import httpx
from rich.console import Console

from payflow.api.auth import create_merchant
from payflow.api.db import connection
from payflow.broker.messages import Envelope
from payflow.config import Settings
from payflow.db.pool import create_pool
from payflow.observability import configure_logging
from payflow.webhooks.sender import WebhookSender, build_http_client
from payflow_lab.bench.common import bench_database, result_line, setup_url
from payflow_lab.bench.httpx_shards import ShardedTransport, shard_count
from payflow_lab.bench.sink import SinkProcess

ROUNDS = 5  # sends of one webhook at most (a retry tier's job, compressed)
TIMEOUT_S = 30.0  # of every POST here: a loaded machine must not turn into failures
BODY = (
    b'{"payment_id":"00000000-0000-0000-0000-000000000000","status":"succeeded",'
    b'"amount":"1.00","currency":"USD"}'
)


@dataclass(frozen=True, slots=True)
class WebhooksBenchConfig:
    """What `payflow bench webhooks` runs."""

    webhooks: int = 2000  # deliveries per measured run
    delay_s: float = 1.0  # the slow receiver's delay
    prefill: int = 100_000  # delivered payments already in the table


async def _fill(
    url: str, settings: Settings, config: WebhooksBenchConfig, urls: list[str]
) -> tuple[uuid.UUID, dict[str, list[uuid.UUID]]]:
    """The merchant, `prefill` delivered payments, and `webhooks` final undelivered
    payments per receiver URL; then VACUUM ANALYZE."""
    pool = await create_pool(settings.database, min_size=1, max_size=2)
    try:
        async with connection(pool) as conn:
            merchant_id, _key, _secret = await create_merchant(conn, "bench", admin=False)
    finally:
        await pool.close()
    admin = await asyncpg.connect(setup_url(settings, url))
    try:
        await admin.execute(
            "INSERT INTO payments (merchant_id, amount, currency, idempotency_key, status,"
            " processed_at, webhook_url, webhook_delivered_at, webhook_attempts)"
            " SELECT $1, 1.00, 'USD', 'fill-' || i, 'succeeded', now(), 'http://127.0.0.1/x',"
            " now(), 1 FROM generate_series(1, $2) i",
            merchant_id,
            config.prefill,
        )
        targets: dict[str, list[uuid.UUID]] = {}
        for n, hook in enumerate(urls):
            rows = await admin.fetch(
                "INSERT INTO payments (merchant_id, amount, currency, idempotency_key, status,"
                " processed_at, webhook_url)"
                " SELECT $1, 1.00, 'USD', 'run-' || $2::int || '-' || i, 'succeeded', now(), $3"
                " FROM generate_series(1, $4) i RETURNING id",
                merchant_id,
                n,
                hook,
                config.webhooks,
            )
            targets[hook] = [r["id"] for r in rows]
        await admin.execute("VACUUM ANALYZE payments")
    finally:
        await admin.close()
    return merchant_id, targets


def _envelope(payment_id: uuid.UUID, attempt: int) -> Envelope:
    """The payment's job as its chain's `attempt`-th message (a resend with attempt 1
    again would be a stale copy of the chain, dropped: `payflow.webhooks.chains`)."""
    payload = {"version": 1, "payment_id": str(payment_id)}
    return Envelope(f"bench-{payment_id}", "webhook.deliver", payload, "", attempt, b"")


async def _run_sender(sender: WebhookSender, ids: list[uuid.UUID]) -> tuple[float, int]:
    """Every payment's webhook through the sender (it bounds the sends in flight); a
    failed send is sent again at once, as a retry tier would later, up to `ROUNDS` times.
    Returns (seconds, failed attempts)."""
    started = time.perf_counter()
    failed = 0
    todo = ids
    for attempt in range(1, ROUNDS + 1):
        outcomes = await asyncio.gather(
            *(sender.handle(_envelope(i, attempt)) for i in todo), return_exceptions=True
        )
        todo = [i for i, outcome in zip(todo, outcomes, strict=True) if outcome is not None]
        failed += len(todo)
        if not todo:
            break
    return time.perf_counter() - started, failed


async def _run_bare(hook: str, count: int, in_flight: int, timeout_s: float) -> tuple[float, int]:
    """`count` POSTs of the same body with `in_flight` at once; (seconds, 2xx answers)."""
    gate = asyncio.Semaphore(in_flight)
    ok = 0
    # httpx's best layout for many connections: several small pools (httpx_shards).
    shards = shard_count(in_flight)
    per_shard = -(-in_flight // shards)
    limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
    transport = ShardedTransport(
        [httpx.AsyncHTTPTransport(limits=limits, trust_env=False) for _ in range(shards)]
    )
    async with httpx.AsyncClient(transport=transport, timeout=timeout_s, trust_env=False) as client:

        async def one() -> None:
            nonlocal ok
            async with gate:
                try:
                    response = await client.post(hook, content=BODY)
                except httpx.HTTPError:
                    return
                ok += 200 <= response.status_code < 300

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(count)))
        return time.perf_counter() - started, ok


async def _run_bare_aiohttp(
    hook: str, count: int, in_flight: int, timeout_s: float
) -> tuple[float, int]:
    """The same loop over aiohttp's client (the library the sender's `WebhookClient` is
    built on, without its pinning); (seconds, 2xx answers)."""
    gate = asyncio.Semaphore(in_flight)
    ok = 0
    connector = aiohttp.TCPConnector(limit=in_flight)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one() -> None:
            nonlocal ok
            async with gate:
                try:
                    async with session.post(hook, data=BODY) as response:
                        await response.read()
                        ok += 200 <= response.status < 300
                except (aiohttp.ClientError, TimeoutError):
                    return

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(count)))
        return time.perf_counter() - started, ok


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _with_cpu(run: Awaitable[tuple[float, int]]) -> tuple[float, int, float]:
    """`run`'s (seconds, count) and the CPU seconds this process spent meanwhile (the
    receivers run in their own processes, so that is the client's, and for the sender
    also its claim and record statements)."""
    before = _cpu_s()
    seconds, count = await run
    return seconds, count, _cpu_s() - before


async def run_webhooks_bench(settings: Settings, config: WebhooksBenchConfig) -> bool:
    """Run the four measurements; print figures and the `key=value` last line. True when
    every webhook was delivered and every bare POST got a 2xx."""
    console = Console(soft_wrap=True)
    configure_logging(settings.model_copy(update={"log_level": "WARNING"}))
    receivers = {0.0: SinkProcess(0.0), config.delay_s: SinkProcess(config.delay_s)}
    figures: dict[str, float] = {}
    ok = True
    try:
        async with bench_database(settings) as url:
            bench = settings.model_copy(
                update={
                    "database_url": url,
                    "webhook_allow_hosts": ("127.0.0.1",),
                    "webhook_timeout_s": TIMEOUT_S,
                    "webhook_lease_s": 2 * TIMEOUT_S,
                }
            )
            hooks = [r.url for r in receivers.values()]
            _merchant, targets = await _fill(url, bench, config, hooks)
            pool = await create_pool(bench)
            client = build_http_client(bench)
            try:
                sender = WebhookSender(
                    pool, bench, client, database=bench, pipeline=bench, broker=bench
                )
                for delay, receiver in receivers.items():
                    tag = f"d{delay:g}"
                    seconds, failed, cpu = await _with_cpu(
                        _run_sender(sender, targets[receiver.url])
                    )
                    figures[f"sender_{tag}_per_s"] = config.webhooks / seconds
                    figures[f"sender_{tag}_failed"] = failed
                    figures[f"sender_{tag}_cpu_us"] = cpu / config.webhooks * 1e6
                    bare: Callable[..., Awaitable[tuple[float, int]]]
                    for name, bare in (("bare", _run_bare), ("aiohttp", _run_bare_aiohttp)):
                        bare_s, bare_ok, cpu = await _with_cpu(
                            bare(
                                receiver.url,
                                config.webhooks,
                                bench.webhook_max_in_flight,
                                TIMEOUT_S,
                            )
                        )
                        figures[f"{name}_{tag}_per_s"] = config.webhooks / bare_s
                        figures[f"{name}_{tag}_cpu_us"] = cpu / config.webhooks * 1e6
                        ok = ok and bare_ok == config.webhooks
                delivered = await pool.fetchval(
                    "SELECT count(*) FROM payments WHERE idempotency_key LIKE 'run-%'"
                    " AND webhook_delivered_at IS NOT NULL"
                )
                ok = ok and delivered == len(receivers) * config.webhooks
            finally:
                await client.aclose()
                await pool.close()
    finally:
        answered = sum(r.stop().answered for r in receivers.values())
    console.print(
        f"{config.webhooks} webhooks per run; {config.prefill} delivered payments in the table; "
        f"WEBHOOK_MAX_IN_FLIGHT={settings.webhook_max_in_flight}, "
        f"DB_POOL_MAX={settings.db_pool_max}; receivers answered {answered} POSTs"
    )
    for delay in receivers:
        tag = f"d{delay:g}"
        sender_rate, bare_rate = figures[f"sender_{tag}_per_s"], figures[f"bare_{tag}_per_s"]
        console.print(
            f"receiver delay {delay:g} s: sender {sender_rate:.1f}/s, bare httpx loop "
            f"{bare_rate:.1f}/s, ratio {sender_rate / bare_rate:.2f}; bare aiohttp loop "
            f"{figures[f'aiohttp_{tag}_per_s']:.1f}/s"
        )
        console.print(
            f"  client CPU per POST: sender {figures[f'sender_{tag}_cpu_us']:.0f} us (with its"
            f" two statements), bare httpx {figures[f'bare_{tag}_cpu_us']:.0f} us, bare aiohttp"
            f" {figures[f'aiohttp_{tag}_cpu_us']:.0f} us"
        )
    failures = sum(v for k, v in figures.items() if k.endswith("_failed"))
    console.print(
        f"sender attempts that failed and were sent again: {failures:g}; every webhook "
        f"delivered, every bare POST answered: {'yes' if ok else 'no'}"
    )
    line: dict[str, object] = {}
    for delay in receivers:
        tag = f"d{delay:g}"
        sender_rate, bare_rate = figures[f"sender_{tag}_per_s"], figures[f"bare_{tag}_per_s"]
        line[f"sender_{tag}_per_s"] = round(sender_rate, 1)
        line[f"bare_{tag}_per_s"] = round(bare_rate, 1)
        line[f"ratio_{tag}"] = round(sender_rate / bare_rate, 2)
        line[f"cpu_us_sender_{tag}"] = round(figures[f"sender_{tag}_cpu_us"])
        line[f"cpu_us_httpx_{tag}"] = round(figures[f"bare_{tag}_cpu_us"])
        line[f"cpu_us_aiohttp_{tag}"] = round(figures[f"aiohttp_{tag}_cpu_us"])
    line["max_in_flight"] = settings.webhook_max_in_flight
    line["db_pool"] = settings.db_pool_max
    line["failed_attempts"] = int(failures)
    line["all_delivered"] = "yes" if ok else "no"
    print(result_line(**line))
    return ok
