"""`payflow bench webhooks --fanout N`: each merchant event fanned out to N webhook
endpoints, delivered by the real endpoint sender, against a bare aiohttp loop making the
same number of POSTs, in one run.

The events are recorded through `record_event` (the SQL function `merchant_event_record`
makes the N deliveries of each, with their outbox rows, in the event's statement; the
recording time is printed apart). The sender path is `EndpointSender.handle` as the worker
calls it (claim the lease in one statement, sign, SSRF-check and POST with no transaction
open, record in a second statement), driven straight from this process; the broker is
left out (`bench e2e` has it). The receiver is `WebhookSink` in its own process.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from rich.console import Console

from payflow.api.auth import create_merchant, new_webhook_secret
from payflow.api.db import connection
from payflow.broker.messages import Envelope
from payflow.config import Settings
from payflow.db.pool import create_pool
from payflow.observability import configure_logging
from payflow.webhooks import EventKind, build_http_client, record_event
from payflow.webhooks.endpoints import EndpointSender, create_endpoint
from payflow_lab.bench.common import bench_database, result_line
from payflow_lab.bench.sink import SinkProcess
from payflow_lab.bench.webhooks import ROUNDS, TIMEOUT_S, _run_bare_aiohttp, _with_cpu

DATA = {"payment_id": "00000000-0000-0000-0000-000000000000", "amount": "1.00"}


@dataclass(frozen=True, slots=True)
class FanoutBenchConfig:
    """What `payflow bench webhooks --fanout N` runs."""

    events: int = 2000  # events recorded
    fanout: int = 3  # endpoints each event goes to


def _envelope(delivery_id: int, attempt: int) -> Envelope:
    payload = {"version": 1, "delivery_id": delivery_id}
    return Envelope(f"bench-{delivery_id}", "endpoint.deliver", payload, "", attempt, b"")


async def _run_sender(sender: EndpointSender, ids: list[int]) -> tuple[float, int]:
    """Every delivery through the sender; a failed one sent again at once, up to `ROUNDS`
    times. Returns (seconds, failed attempts)."""
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


async def run_fanout_bench(settings: Settings, config: FanoutBenchConfig) -> bool:
    """Record `events` events for a merchant with `fanout` endpoints, deliver them all,
    then run the bare loop with as many POSTs; print figures and the `key=value` last
    line (`ratio` = sender deliveries/s over bare aiohttp POSTs/s, same run). True when
    every delivery was delivered and every bare POST got a 2xx."""
    console = Console(soft_wrap=True)
    configure_logging(settings.model_copy(update={"log_level": "WARNING"}))
    receiver = SinkProcess(0.0)
    total = config.events * config.fanout
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
            pool = await create_pool(bench)
            client = build_http_client(bench)
            try:
                async with connection(pool) as conn:
                    merchant_id, _key, _secret = await create_merchant(conn, "bench", admin=False)
                    for n in range(config.fanout):
                        await create_endpoint(
                            conn,
                            merchant_id,
                            url=f"{receiver.url}?endpoint={n}",
                            events=["*"],
                            secret=new_webhook_secret(),
                        )
                started = time.perf_counter()
                async with connection(pool) as conn, conn.transaction():
                    for n in range(config.events):
                        await record_event(
                            conn, merchant_id, EventKind.PAYMENT_SUCCEEDED, f"bench-{n}", DATA
                        )
                record_s = time.perf_counter() - started
                ids = [int(r["id"]) for r in await pool.fetch("SELECT id FROM webhook_deliveries")]
                sender = EndpointSender(pool, bench, client, database=bench, broker=bench)
                seconds, failed, cpu = await _with_cpu(_run_sender(sender, ids))
                bare_s, bare_ok, bare_cpu = await _with_cpu(
                    _run_bare_aiohttp(receiver.url, total, bench.webhook_max_in_flight, TIMEOUT_S)
                )
                delivered = await pool.fetchval(
                    "SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'"
                )
            finally:
                await client.aclose()
                await pool.close()
    finally:
        answered = receiver.stop().answered
    ok = len(ids) == total and delivered == total and bare_ok == total
    sender_rate, bare_rate = total / seconds, total / bare_s
    console.print(
        f"{config.events} events x {config.fanout} endpoints = {total} deliveries; recorded in"
        f" {record_s:.2f} s ({config.events / record_s:.0f} events/s, one transaction);"
        f" WEBHOOK_MAX_IN_FLIGHT={settings.webhook_max_in_flight}; receiver answered {answered}"
    )
    console.print(
        f"endpoint sender {sender_rate:.1f} deliveries/s, bare aiohttp loop {bare_rate:.1f}"
        f" POSTs/s, ratio {sender_rate / bare_rate:.2f}; client CPU per POST: sender"
        f" {cpu / total * 1e6:.0f} us (with its two statements), bare {bare_cpu / total * 1e6:.0f}"
        f" us; failed attempts sent again: {failed}"
    )
    print(
        result_line(
            fanout=config.fanout,
            events=config.events,
            deliveries=total,
            sender_per_s=round(sender_rate, 1),
            aiohttp_per_s=round(bare_rate, 1),
            ratio=round(sender_rate / bare_rate, 2),
            record_events_per_s=round(config.events / record_s),
            failed_attempts=failed,
            all_delivered="yes" if ok else "no",
        )
    )
    return ok
