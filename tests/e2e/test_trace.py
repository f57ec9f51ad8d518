"""One trace through everything: a payment POSTed with a W3C `traceparent` keeps that
trace id in every process it passes through and in the webhook the merchant receives.

The API, the relay and the worker (which also sends the webhooks) run as three real OS
processes (`payflow api`, `payflow relay`, `payflow worker`) with JSON logs at DEBUG,
each into its own file; they share nothing but PostgreSQL and RabbitMQ, so the trace id
can only get from one to the next through the rows and the messages.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.payments.finalize import credit_event_id
from payflow.webhooks.sender import webhook_id
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.ports import free_port
from payflow_lab.supervisor import spawn_payflow
from tests.e2e.test_http_flow import LIMIT_S, ROOT, _env
from tests.integration.support import wait_until

TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE}-{CALLER_SPAN}-01"
OUTBOUND = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01")


class Process:
    """One payflow role as an OS process, its stdout and stderr in `log_path`."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], tmp: Path) -> None:
        self.name = name
        self.log_path = tmp / f"{name}.log"
        self.process = spawn_payflow(args, env, self.log_path, cwd=ROOT)

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def lines(self) -> list[dict[str, Any]]:
        """The JSON log lines (anything else, e.g. a traceback, is skipped)."""
        parsed: list[dict[str, Any]] = []
        for raw in self.text().splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict) and "event" in line:
                parsed.append(line)
        return parsed

    async def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        return await asyncio.to_thread(self.process.wait, 60)


@pytest.fixture
async def api_key(pool: asyncpg.Pool) -> str:
    """A merchant's API key."""
    async with pool.acquire() as conn:
        _merchant_id, key, _secret = await create_merchant(conn, "shop", admin=False)
    return str(key)


@pytest.fixture
async def roles(
    pipe_settings: Settings, api_key: str, tmp_path: Path
) -> AsyncIterator[tuple[dict[str, Process], httpx.AsyncClient]]:
    """`payflow api`, `payflow relay` and `payflow worker`, JSON logs at DEBUG; the API
    answering GET /health."""
    port = free_port()
    env = _env(pipe_settings, port) | {"LOG_JSON": "true", "LOG_LEVEL": "DEBUG"}
    started = {
        "api": Process("api", ["api", "--workers", "1"], env, tmp_path),
        "relay": Process("relay", ["relay"], env, tmp_path),
        "worker": Process("worker", ["worker"], env, tmp_path),
    }
    client = httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", headers={"X-API-Key": api_key}, timeout=10
    )
    try:

        async def healthy() -> bool:
            for process in started.values():
                assert process.process.poll() is None, process.text()
            try:
                return (await client.get("/health")).status_code == 200
            except httpx.TransportError:
                return False

        await wait_until(healthy, limit_s=LIMIT_S, what="GET /health to answer 200")
        yield started, client
    finally:
        await client.aclose()
        for process in started.values():
            if process.process.poll() is None:
                process.process.kill()
                process.process.wait(timeout=30)


def _traced(lines: list[dict[str, Any]], keep: Callable[[str], bool]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("trace_id") == TRACE and keep(line["event"])]


async def test_one_payment_carries_its_trace_id_through_every_process_and_the_webhook(
    pool: asyncpg.Pool,
    sink: WebhookSink,
    roles: tuple[dict[str, Process], httpx.AsyncClient],
) -> None:
    processes, client = roles
    response = await client.post(
        "/api/v1/payments",
        json={
            "amount": "7.25",
            "currency": "RUB",
            "description": "traced order",
            "metadata": {},
            "webhook_url": sink.url,
        },
        headers={
            "Idempotency-Key": "traced-1",
            "traceparent": TRACEPARENT,
            "X-Request-ID": "req-traced-1",
        },
    )
    assert response.status_code == 202, response.text
    assert response.headers["traceparent"].split("-")[1] == TRACE
    assert response.headers["x-request-id"] == "req-traced-1"
    payment_id = uuid.UUID(response.json()["payment_id"])

    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        limit_s=LIMIT_S,
        what="the webhook to be delivered",
    )
    await wait_until(
        lambda: pool.fetchval(
            "SELECT status = 'confirmed' FROM payment_events WHERE event_id = $1",
            credit_event_id(payment_id),
        ),
        limit_s=LIMIT_S,
        what="the merchant credit to be confirmed",
    )
    for process in processes.values():
        assert await process.stop() == 0, process.text()

    # The rows: the payment, its credit event and every outbox message it caused.
    assert await pool.fetchval("SELECT trace_id FROM payments WHERE id = $1", payment_id) == TRACE
    assert (
        await pool.fetchval(
            "SELECT trace_id FROM payment_events WHERE event_id = $1", credit_event_id(payment_id)
        )
        == TRACE
    )
    outbox = await pool.fetch("SELECT topic, trace_id FROM outbox ORDER BY id")
    assert sorted(row["topic"] for row in outbox) == [
        "ledger.event",
        "payment.created",
        "webhook.deliver",
    ]
    assert {row["trace_id"] for row in outbox} == {TRACE}

    # The API: the request's line carries the trace id and the caller's request id.
    api = _traced(processes["api"].lines(), lambda e: e == "payflow.api.request")
    assert [(a["route"], a["status"], a["request_id"]) for a in api] == [
        ("/api/v1/payments", 202, "req-traced-1")
    ]
    # The relay: each of the three messages was relayed under the trace id.
    relay = _traced(processes["relay"].lines(), lambda e: e == "payflow.outbox.relayed")
    assert sorted(line["topic"] for line in relay) == [
        "ledger.event",
        "payment.created",
        "webhook.deliver",
    ]
    # The worker: the charge, the posting and the webhook send all log the trace id,
    # and no line about this payment or its credit event lacks it.
    worker = processes["worker"].lines()
    traced_events = {line["event"] for line in _traced(worker, lambda e: True)}
    assert {
        "payflow.payments.charging",
        "payflow.payments.finalized",
        "payflow.ledger.posted",
        "payflow.webhooks.delivered",
    } <= traced_events
    about_it = [
        line
        for line in worker
        if line.get("payment_id") == str(payment_id)
        or line.get("event_id") == credit_event_id(payment_id)
    ]
    assert about_it and all(line.get("trace_id") == TRACE for line in about_it)

    # The merchant: one webhook, whose traceparent names our trace and a new span.
    assert len(sink.received) == 1
    request = sink.received[0]
    assert request.headers["webhook-id"] == webhook_id(payment_id)
    match = OUTBOUND.fullmatch(request.headers["traceparent"])
    assert match is not None, request.headers
    assert match.group(1) == TRACE and match.group(2) != CALLER_SPAN
