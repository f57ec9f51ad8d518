"""Alert delivery over real sockets on 127.0.0.1: the generic webhook's body, PagerDuty
Events API v2 bodies, and receivers that fail, hang or are gone; never into the caller.
Also: the table is unreachable (a DSN on a closed port) and the alert is still delivered."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import orjson
import pytest
from pydantic import SecretStr
from structlog.testing import capture_logs

from payflow.alerts import Severity
from payflow.alerts.build import build_alert_sink
from payflow.config import Settings
from payflow_lab.bench.sink import WebhookSink

ROUTING_KEY = "R0UT1NG-KEY-0123456789abcdef"


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookSink]:
    sink = WebhookSink()
    await sink.start()
    yield sink
    await sink.stop()


def _bodies(receiver: WebhookSink) -> list[dict[str, Any]]:
    return [orjson.loads(r.body) for r in receiver.received]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_webhook_body_cooldown_and_resolution(
    pool: asyncpg.Pool, settings: Settings, receiver: WebhookSink
) -> None:
    webhook = settings.model_copy(
        update={"alert_delivery": "webhook", "alert_webhook_url": receiver.url}
    )
    sink = build_alert_sink(webhook, pool, database=webhook)
    await sink.fire("dlq.growth", Severity.WARNING, "12 new dead letters", details={"new": 12})
    await sink.fire("dlq.growth", Severity.WARNING, "13 new dead letters", details={"new": 13})
    await sink.resolve("dlq.growth")
    await receiver.wait_for(2)
    first_seen = await pool.fetchval("SELECT first_seen FROM alerts WHERE key = 'dlq.growth'")
    assert _bodies(receiver) == [
        {
            "key": "dlq.growth",
            "severity": "warning",
            "message": "12 new dead letters",
            "details": {"new": 12},
            "first_seen": first_seen.isoformat(),
            "count": 1,
            "status": "firing",
        },
        {
            "key": "dlq.growth",
            "severity": "warning",
            "message": "13 new dead letters",
            "details": {"new": 13},
            "first_seen": first_seen.isoformat(),
            "count": 2,
            "status": "resolved",
        },
    ]
    assert receiver.received[0].headers["content-type"] == "application/json"


async def test_pagerduty_trigger_and_resolve_events(
    pool: asyncpg.Pool, settings: Settings, receiver: WebhookSink
) -> None:
    pagerduty = settings.model_copy(
        update={
            "alert_delivery": "pagerduty",
            "alert_pagerduty_url": receiver.url,
            "alert_pagerduty_routing_key": SecretStr(ROUTING_KEY),
        }
    )
    sink = build_alert_sink(pagerduty, pool, database=pagerduty)
    with capture_logs() as logs:
        await sink.fire("recon.mismatch:hot", Severity.CRITICAL, "sums differ", details={"n": 2})
        await sink.fire("zombies", Severity.WARNING, "3 stuck")
        await sink.fire("relay.lag", Severity.INFO, "catching up")
        await sink.resolve("recon.mismatch:hot")
    await receiver.wait_for(4)
    bodies = _bodies(receiver)
    trigger = bodies[0]
    assert trigger["routing_key"] == ROUTING_KEY
    assert trigger["event_action"] == "trigger"
    assert trigger["dedup_key"] == "recon.mismatch:hot"
    assert trigger["payload"]["summary"] == "[recon.mismatch:hot] sums differ"
    assert trigger["payload"]["severity"] == "critical"
    assert trigger["payload"]["source"] == f"payflow@{socket.gethostname()}"
    assert trigger["payload"]["custom_details"]["n"] == 2
    assert trigger["payload"]["custom_details"]["count"] == 1
    assert [b["payload"]["severity"] for b in bodies[1:3]] == ["warning", "info"]
    assert bodies[3] == {
        "routing_key": ROUTING_KEY,
        "event_action": "resolve",
        "dedup_key": "recon.mismatch:hot",
    }
    assert ROUTING_KEY not in repr(logs)  # the secret is never logged


async def test_a_failing_receiver_never_raises_and_the_table_keeps_the_record(
    pool: asyncpg.Pool, settings: Settings, receiver: WebhookSink
) -> None:
    receiver.status_for = lambda _r: 500
    pagerduty = settings.model_copy(
        update={
            "alert_delivery": "pagerduty",
            "alert_pagerduty_url": receiver.url,
            "alert_pagerduty_routing_key": SecretStr(ROUTING_KEY),
        }
    )
    sink = build_alert_sink(pagerduty, pool, database=pagerduty)
    with capture_logs() as logs:
        await sink.fire("zombies", Severity.CRITICAL, "3 stuck")
        await sink.resolve("zombies")
    failures = [e for e in logs if e["event"] == "payflow.alerts.delivery_failed"]
    assert [(e["status"], e["error"]) for e in failures] == [
        ("firing", "HTTP 500"),
        ("resolved", "HTTP 500"),
    ]
    assert ROUTING_KEY not in repr(logs)
    row = await pool.fetchrow("SELECT count, resolved_at FROM alerts WHERE key = 'zombies'")
    assert row["count"] == 1 and row["resolved_at"] is not None


async def test_a_gone_or_hanging_receiver_never_raises(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)  # accepts, never answers
        writer.close()

    server = await asyncio.start_server(hang, "127.0.0.1", 0)
    hanging = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook"
    gone = f"http://127.0.0.1:{_closed_port()}/hook"
    try:
        with capture_logs() as logs:
            for n, url in enumerate((gone, hanging)):
                webhook = settings.model_copy(
                    update={
                        "alert_delivery": "webhook",
                        "alert_webhook_url": url,
                        "alert_timeout_s": 0.5,
                    }
                )
                await asyncio.wait_for(
                    build_alert_sink(webhook, pool, database=webhook).fire(
                        f"k{n}", Severity.CRITICAL, "m"
                    ),
                    10,
                )
    finally:
        server.close()
    failures = [e["error"] for e in logs if e["event"] == "payflow.alerts.delivery_failed"]
    assert failures == ["ConnectError", "ReadTimeout"]
    assert await pool.fetchval("SELECT count(*) FROM alerts") == 2


async def test_an_unreachable_database_still_delivers_and_never_raises(
    settings: Settings, receiver: WebhookSink
) -> None:
    down = await asyncpg.create_pool(
        f"postgresql://payflow@127.0.0.1:{_closed_port()}/payflow", min_size=0, max_size=1
    )
    webhook = settings.model_copy(
        update={"alert_delivery": "webhook", "alert_webhook_url": receiver.url}
    )
    sink = build_alert_sink(webhook, down, database=webhook)
    try:
        with capture_logs() as logs:
            await sink.fire("db.down", Severity.CRITICAL, "first")
            await sink.fire("db.down", Severity.CRITICAL, "second")  # cooling: counted
            await sink.resolve("db.down")
    finally:
        await down.close()
    await receiver.wait_for(2)
    assert [(b["status"], b["count"], b["message"]) for b in _bodies(receiver)] == [
        ("firing", 1, "first"),
        ("resolved", 2, "second"),
    ]
    assert _bodies(receiver)[0]["first_seen"] is not None  # from the sink's memory
    store_failures = [e["op"] for e in logs if e["event"] == "payflow.alerts.store_failed"]
    assert store_failures == ["fire", "fire", "resolve"]
