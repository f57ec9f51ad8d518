"""A role (relay, worker, api) started while PostgreSQL is unreachable waits for it and
then works, instead of exiting 1 (the chaos runs counted such exits; a supervisor had
to restart the role)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

from payflow.config import Settings
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from payflow_lab.chaos.proxy import ProxyThread
from payflow_lab.ports import free_port
from tests.integration.support import START_LIMIT_S, wait_until
from tests.processes import spawn_role


def _through(url: str, port: int) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))


def _spawn(
    role: str, settings: Settings, database_url: str, log_path: Path, *args: str
) -> subprocess.Popen[bytes]:
    return spawn_role(
        settings,
        log_path,
        role,
        *args,
        DATABASE_URL=database_url,
        GATEWAY_DELAY_MIN_S="0",
        GATEWAY_DELAY_MAX_S="0",
        GATEWAY_FAILURE_RATE="0",
        METRICS_PORT=str(free_port()),
        API_KEY="outage-api-key-0123456789",
        PROVIDER_WEBHOOK_SECRET="outage-provider-secret-0123456789abcdef",
        LOG_LEVEL="INFO",
    )


async def test_relay_and_worker_started_during_an_outage_wait_then_deliver(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    tmp_path: Path,
) -> None:
    proxies = ProxyThread()
    dead_port = free_port()  # nothing listens: every connection is refused
    proxy = proxies.add("postgres", dead_port)
    url = _through(pipe_settings.database_url, proxy.port)
    api_port = free_port()
    extra = {"api": ("--port", str(api_port), "--workers", "1")}
    procs = {
        role: _spawn(role, pipe_settings, url, tmp_path / f"{role}.log", *extra.get(role, ()))
        for role in ("relay", "worker", "api")
    }
    try:
        for role, proc in procs.items():
            log_path = tmp_path / f"{role}.log"

            async def waiting(proc=proc, log_path=log_path) -> bool:  # type: ignore[no-untyped-def]
                assert proc.poll() is None, log_path.read_text()[-2000:]
                return "payflow.db.connect_failed" in await asyncio.to_thread(log_path.read_text)

            await wait_until(waiting, limit_s=START_LIMIT_S, what=f"{role} to report the outage")
        await asyncio.sleep(2)  # a few retries later, both still wait
        assert all(proc.poll() is None for proc in procs.values())

        proxy.target_port = urlsplit(pipe_settings.database_url).port or 5432  # PostgreSQL is back
        payment_id = await submitter.submit_payment(
            merchant[0], "3.00", "USD", "k-outage", sink.url
        )
        await wait_until(
            lambda: pool.fetchval(
                "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
            ),
            what="delivery once PostgreSQL is reachable",
            limit_s=60,
        )
        # The merchant's first success in USD opens its account in the finalize's
        # transaction, and the ledger worker posts that credit from its job: it may land
        # a moment after the webhook.
        await wait_until(
            lambda: pool.fetchval("SELECT count(*) = 1 FROM balance_events"),
            what="the credit posted",
            limit_s=60,
        )
        assert await pool.fetchval("SELECT count(*) FROM balance_events") == 1
        assert len(sink.received) == 1

        async def api_answers() -> bool:
            assert procs["api"].poll() is None
            async with httpx.AsyncClient() as client:
                try:
                    response = await client.get(
                        f"http://127.0.0.1:{api_port}/api/v1/payments/{payment_id}",
                        headers={"X-API-Key": "outage-api-key-0123456789"},
                    )
                except httpx.TransportError:
                    return False
            # Read from PostgreSQL: the payment belongs to another merchant.
            assert response.status_code == 404, response.text
            return True

        await wait_until(api_answers, what="the API to serve once PostgreSQL is back")
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proxies.close()
    assert [proc.returncode for proc in procs.values()] == [0, 0, 0]


async def test_the_scheduler_runs_its_jobs_while_rabbitmq_is_down(
    pool: asyncpg.Pool, pipe_settings: Settings, tmp_path: Path
) -> None:
    """The scheduler writes PostgreSQL only (its messages leave through the outbox), so a
    scheduler process never waits for the broker: with RabbitMQ unreachable it still runs
    its jobs (the scanner is the same kind of role)."""
    dead_port = free_port()  # nothing listens: every connection is refused
    process = spawn_role(
        pipe_settings,
        tmp_path / "scheduler.log",
        "scheduler",
        DATABASE_URL=pipe_settings.database_url,
        RABBITMQ_URL=f"amqp://guest:guest@127.0.0.1:{dead_port}/",
        METRICS_PORT=str(free_port()),
        LOG_LEVEL="INFO",
    )
    try:
        await wait_until(
            lambda: pool.fetchval("SELECT count(*) FROM job_runs WHERE finished_at IS NOT NULL"),
            limit_s=60,
            what="a finished job run",
        )
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    log = (tmp_path / "scheduler.log").read_text()
    assert "payflow.broker.connect_failed" not in log
