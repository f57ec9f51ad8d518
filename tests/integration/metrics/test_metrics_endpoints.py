"""Scraping real endpoints: a `payflow worker` subprocess on its METRICS_PORT and the
API's /metrics. The state gauges reflect rows inserted here, and a posting counts in
`payflow_postings_total{outcome="success"}`."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import aio_pika
import asyncpg
import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

from payflow.app import create_app
from payflow.broker.consumer import Consumer, Route
from payflow.broker.messages import Envelope
from payflow.broker.publisher import publish
from payflow.broker.topology import declare_topology
from payflow.config import Settings
from payflow.errors import BadInput, InsufficientFunds, PayflowError, RetryableError
from payflow.gauges import StateRefresher
from payflow.ledger.posting import post_event
from payflow.metrics import DLQ_UNRESOLVED, REGISTRY
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from payflow_lab.ports import free_port
from payflow_lab.supervisor import spawn_payflow, stop_process
from tests.integration.api.conftest import (  # noqa: F401 - fixtures
    API_KEY,
    api_settings,
    redis_cleanup,
    redis_prefix,
)
from tests.integration.support import queue_depth, wait_until

ROOT = Path(__file__).resolve().parents[3]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """{(sample name, labels): value} of one exposition."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def spawn_worker(settings: Settings, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=settings.database_url,
        RABBITMQ_URL=settings.rabbitmq_url,
        REDIS_KEY_PREFIX=settings.redis_key_prefix,
        RETRY_TIERS_MS=",".join(str(t) for t in settings.retry_tiers_ms),
        METRICS_PORT=str(port),
        METRICS_REFRESH_S="0.2",
        LOG_JSON="false",
        DB_POOL_MIN="1",
        DB_POOL_MAX="4",
    )
    return spawn_payflow(["worker", "--queues", "ledger"], env, log_path, cwd=ROOT)


async def _account(owner_pool: asyncpg.Pool) -> uuid.UUID:
    account: uuid.UUID = await owner_pool.fetchval(
        "INSERT INTO accounts (asset) VALUES ('USD') RETURNING id"
    )
    return account


async def _pending_events(owner_pool: asyncpg.Pool, account: uuid.UUID, count: int) -> None:
    """Events with no outbox row: nothing publishes them, they stay pending."""
    for _ in range(count):
        await owner_pool.execute(
            "INSERT INTO payment_events (event_id, account_id, amount, event_type)"
            " VALUES ($1, $2, 1, 'deposit')",
            f"idle-{uuid.uuid4().hex}",
            account,
        )


async def _scrape(url: str, **kwargs: Any) -> Samples:
    async with httpx.AsyncClient(timeout=5) as http:
        response = await http.get(url, **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


async def test_worker_serves_state_gauges_and_counts_its_posting(
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    start_roles: Any,
    tmp_path: Path,
) -> None:
    account = await _account(owner_pool)
    await _pending_events(owner_pool, account, 2)
    port = free_port()
    log_path = tmp_path / "worker.log"
    proc = spawn_worker(pipe_settings, port, log_path)
    try:
        url = f"http://127.0.0.1:{port}/metrics"

        async def up() -> Samples | None:
            assert proc.poll() is None, log_path.read_text()
            try:
                samples = await _scrape(url)
            except httpx.TransportError:
                return None
            return samples if value(samples, "payflow_events", status="pending") == 2 else None

        before = await wait_until(up, what="the worker's metrics server")
        assert value(before, "payflow_payments", status="pending") == 0
        assert value(before, "payflow_dlq_unresolved") == 0
        assert value(before, "payflow_postings_total", outcome="success") is None

        await start_roles(("relay",))
        await submitter.submit_deposit("metrics-deposit-1", account, "7.50")

        async def posted() -> Samples | None:
            assert proc.poll() is None, log_path.read_text()
            samples = await _scrape(url)
            done = value(samples, "payflow_events", status="confirmed") == 1
            return samples if done else None

        after = await wait_until(posted, what="the deposit to be posted and the gauge refreshed")
        assert value(after, "payflow_postings_total", outcome="success") == 1
        assert value(after, "payflow_consumer_messages_total", queue="ledger", outcome="acked") == 1
        assert value(after, "payflow_events", status="pending") == 2  # the idle ones
        assert value(after, "payflow_outbox_unpublished") == 0
        assert value(after, "payflow_outbox_oldest_unpublished_age_seconds") == 0
        assert value(after, "payflow_queue_messages", queue="payflow.ledger", state="ready") == 0
        assert (
            value(after, "payflow_queue_messages", queue="payflow.ledger.dlq", state="ready") == 0
        )
        balance = await owner_pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account)
        assert str(balance).startswith("7.5")

        # A message on a queue this worker does not consume shows as ready.
        connection = await aio_pika.connect(pipe_settings.rabbitmq_url)
        try:
            channel = await connection.channel(publisher_confirms=True)
            exchange = await channel.get_exchange("payflow")
            body = orjson.dumps({"version": 1, "payment_id": str(uuid.uuid4())})
            await publish(exchange, "payment.created", body, message_id="m-1", trace_id=None)
        finally:
            await connection.close()

        async def ready() -> bool:
            samples = await _scrape(url)
            found = value(
                samples, "payflow_queue_messages", queue="payflow.payments", state="ready"
            )
            return found == 1

        await wait_until(ready, what="the ready message in the queue gauge")
    finally:
        stop_process(proc)


async def test_a_port_in_use_is_one_log_line_and_the_worker_keeps_running(
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    start_roles: Any,
    tmp_path: Path,
) -> None:
    account = await _account(owner_pool)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        log_path = tmp_path / "worker.log"
        proc = spawn_worker(pipe_settings, port, log_path)
        try:
            await start_roles(("relay",))
            await submitter.submit_deposit("metrics-deposit-2", account, "3.00")

            async def confirmed() -> bool:
                assert proc.poll() is None, log_path.read_text()
                status = await owner_pool.fetchval(
                    "SELECT status FROM payment_events WHERE event_id = 'metrics-deposit-2'"
                )
                return bool(status == "confirmed")

            await wait_until(confirmed, what="the worker to post without its metrics server")
        finally:
            stop_process(proc)
    lines = [line for line in log_path.read_text().splitlines() if "bind_failed" in line]
    assert len(lines) == 1, lines
    assert str(port) in lines[0]


async def test_api_metrics_serve_shared_families_and_database_gauges(
    owner_pool: asyncpg.Pool,
    pool: asyncpg.Pool,
    api_settings: Settings,  # noqa: F811
) -> None:
    account = await _account(owner_pool)
    await _pending_events(owner_pool, account, 2)
    await owner_pool.execute(
        "INSERT INTO payment_events (event_id, account_id, amount, event_type)"
        " VALUES ('api-metrics-post', $1, 4, 'deposit')",
        account,
    )
    settings = api_settings.model_copy(update={"metrics_refresh_s": 0.2})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://payflow.test") as http:

            async def scrape() -> Samples:
                response = await http.get("/metrics", headers={"X-API-Key": API_KEY})
                assert response.status_code == 200, response.text
                return parse(response.text)

            async def pending(count: int) -> Samples | None:
                samples = await scrape()
                return (
                    samples if value(samples, "payflow_events", status="pending") == count else None
                )

            before = await wait_until(lambda: pending(3), what="the API's database gauges")
            posted_before = value(before, "payflow_postings_total", outcome="success") or 0
            result = await post_event(pool, settings, "api-metrics-post")
            assert result.outcome.value == "success"
            after = await wait_until(lambda: pending(2), what="the gauges after the posting")
            assert value(after, "payflow_postings_total", outcome="success") == posted_before + 1
            assert value(after, "payflow_events", status="confirmed") == 1
            assert value(after, "payflow_payments", status="succeeded") == 0
            # The API's own families are there too.
            assert any(name == "payflow_http_requests_total" for name, _ in after)
            anonymous = await http.get("/metrics")
            assert anonymous.status_code == 401


async def test_consumer_counts_each_outcome_once_on_a_real_broker(
    pipe_settings: Settings,
) -> None:
    """A real Consumer on the test's vhost: one message per outcome (acked, retried then
    acked, terminal, dead-lettered, undecodable) and the counter moves once for each."""
    connection = await aio_pika.connect_robust(pipe_settings.rabbitmq_url)
    dead: list[str] = []

    async def handler(envelope: Envelope) -> None:
        do = envelope.payload["do"]
        if do == "retry" and envelope.attempt == 1:
            raise RetryableError("transient")
        if do == "refuse":
            raise InsufficientFunds("no funds")
        if do == "bad":
            raise BadInput("cannot be fixed by retrying")

    async def on_dead(envelope: Envelope, error: PayflowError) -> None:
        dead.append(str(envelope.payload["do"]))

    def count(outcome: str) -> float:
        sample = REGISTRY.get_sample_value(
            "payflow_consumer_messages_total", {"queue": "payments", "outcome": outcome}
        )
        return sample or 0.0

    outcomes = ("acked", "retried", "terminal", "dead_lettered")
    before = {outcome: count(outcome) for outcome in outcomes}
    try:
        channel = await connection.channel(publisher_confirms=True)
        names = await declare_topology(channel, pipe_settings)
        exchange = await channel.get_exchange(names.exchange)
        consumer = Consumer(connection, pipe_settings, names, [Route("payments", handler, on_dead)])
        await consumer.start()
        try:
            for do in ("ok", "retry", "refuse", "bad"):
                body = orjson.dumps({"version": 1, "do": do})
                await publish(exchange, "payment.created", body, message_id=do, trace_id=None)
            await exchange.publish(
                aio_pika.Message(b"not json", message_id="junk"), routing_key="payment.created"
            )
            expected = {"acked": 2, "retried": 1, "terminal": 1, "dead_lettered": 2}

            async def settled() -> bool:
                return all(count(k) - before[k] >= v for k, v in expected.items())

            await wait_until(settled, what="every message to be settled")
            await asyncio.sleep(0.3)  # nothing is counted twice
            assert {k: count(k) - before[k] for k in outcomes} == expected
            assert dead == ["bad"]

            async def parked() -> bool:  # bad + the undecodable one
                return await queue_depth(pipe_settings, names.parking_queue("payments")) == 2

            await wait_until(parked, what="both dead letters in the parking queue")
        finally:
            await consumer.stop(5)
    finally:
        await connection.close()


async def test_a_blocked_database_fails_the_refresh_within_its_bound(
    owner_pool: asyncpg.Pool, pool: asyncpg.Pool, settings: Settings
) -> None:
    """A refresh never hangs: with `outbox` locked it gives up after
    METRICS_REFRESH_TIMEOUT_S, counts the failure and keeps the last values."""
    bounded = settings.model_copy(update={"metrics_refresh_timeout_s": 0.5})
    refresher = StateRefresher(pool, bounded, database=bounded, broker=bounded)
    await refresher.refresh()
    DLQ_UNRESOLVED.set(-1)  # a marker: a failed refresh must not overwrite it

    def failures() -> float:
        sample = REGISTRY.get_sample_value(
            "payflow_state_refreshes_total", {"source": "database", "outcome": "failed"}
        )
        return sample or 0.0

    before = failures()
    async with owner_pool.acquire() as locker, locker.transaction():
        await locker.execute("LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        await refresher.refresh()
        elapsed = time.monotonic() - started
    assert elapsed < 3.0
    assert failures() == before + 1
    assert REGISTRY.get_sample_value("payflow_dlq_unresolved") == -1
    await refresher.refresh()  # unblocked: the real value again
    assert REGISTRY.get_sample_value("payflow_dlq_unresolved") == 0


async def test_webhook_attempts_count_delivered_failed_and_refused(
    pool: asyncpg.Pool,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles: Any,
) -> None:
    """One webhook answered 503 then 200 (failed + delivered), one to a host the SSRF
    guard refuses (refused, never POSTed): the counter matches the payments' rows."""

    def attempts(result: str) -> float:
        sample = REGISTRY.get_sample_value("payflow_webhook_attempts_total", {"result": result})
        return sample or 0.0

    before = {result: attempts(result) for result in ("delivered", "failed", "refused")}
    answers = iter([503, 200])
    sink.status_for = lambda _request: next(answers, 200)
    running = await start_roles()
    sent = await submitter.submit_payment(merchant[0], "2.00", "USD", "k-sent", sink.url)
    refused = await submitter.submit_payment(
        merchant[0], "3.00", "USD", "k-refused", "http://localhost:9/hook"
    )
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", sent
        ),
        what="the webhook to be delivered",
    )
    await wait_until(
        lambda: pool.fetchval(
            "SELECT count(*) FROM dead_letter_queue WHERE subject_id = $1", str(refused)
        ),
        what="the refused webhook's dead letter",
    )
    await running.stop()
    delta = {result: attempts(result) - before[result] for result in before}
    assert delta == {"delivered": 1, "failed": 1, "refused": 1}
    assert len(sink.received) == 2
    assert await pool.fetchval("SELECT webhook_attempts FROM payments WHERE id = $1", sent) == 2
