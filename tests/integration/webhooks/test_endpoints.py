"""Webhook endpoints per merchant, on real PostgreSQL and RabbitMQ, against a local HTTP
receiver: fan-out to exactly the endpoints that want an event, retries under one
webhook-id, kill -9 mid-send, rotation (both signatures, then only the new one), the DLQ
and its replay, audited redelivery, scoping (404), auto-disable and CRUD validation.
Every delivery is verified with the `standardwebhooks` library."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest
from fastapi import FastAPI

from payflow.alerts import Severity
from payflow.api.auth import create_merchant, new_webhook_secret
from payflow.app import create_app
from payflow.config import Settings
from payflow.jobs.spec import JobContext
from payflow.ops.dlq_replay import replay_dead_letter
from payflow.webhooks import EventKind, event_body, record_event
from payflow.webhooks.endpoints import Scope, create_endpoint, rotate_secret
from payflow.webhooks.endpoints.jobs import disable_failing_endpoints_job
from tests.integration.support import Running, wait_until
from tests.integration.webhooks.endpoint_receiver import Receiver
from tests.processes import spawn_role

Start = Callable[..., Awaitable[Running]]
DATA = {"payment_id": "p", "amount": "10.00", "currency": "RUB"}


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    server = Receiver()
    await server.start()
    yield server
    await server.stop()


async def _merchant(pool: asyncpg.Pool, name: str) -> tuple[uuid.UUID, str]:
    async with pool.acquire() as conn:
        merchant_id, key, _ = await create_merchant(conn, name, admin=False)
    return merchant_id, key


async def _endpoint(
    pool: asyncpg.Pool, merchant_id: uuid.UUID, url: str, events: list[str], *, enabled: bool = True
) -> tuple[uuid.UUID, str]:
    secret = new_webhook_secret()
    async with pool.acquire() as conn:
        row = await create_endpoint(
            conn, merchant_id, url=url, events=events, secret=secret, enabled=enabled
        )
    return row["id"], secret


async def _event(
    pool: asyncpg.Pool, merchant_id: uuid.UUID, kind: EventKind, subject: str | None = None
) -> str:
    async with pool.acquire() as conn, conn.transaction():
        event_id = await record_event(conn, merchant_id, kind, subject or uuid.uuid4().hex, DATA)
    assert event_id is not None
    return event_id


async def _delivered(pool: asyncpg.Pool, event_id: str) -> int:
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM webhook_deliveries WHERE event_id = $1 AND state = 'delivered'",
            event_id,
        )
    )


async def test_an_event_reaches_exactly_the_endpoints_that_want_it(
    pool: asyncpg.Pool, start_roles: Start, receiver: Receiver
) -> None:
    shop, _ = await _merchant(pool, "shop")
    stranger, _ = await _merchant(pool, "stranger")
    every, every_secret = await _endpoint(pool, shop, receiver.url("every"), ["*"])
    _, paid_secret = await _endpoint(pool, shop, receiver.url("paid"), ["payment.succeeded"])
    await _endpoint(pool, shop, receiver.url("deposits"), ["deposit.credited"])
    await _endpoint(pool, shop, receiver.url("off"), ["*"], enabled=False)
    await _endpoint(pool, stranger, receiver.url("stranger"), ["*"])
    await start_roles(("relay", "worker"), worker_queues=("endpoints",))

    paid = await _event(pool, shop, EventKind.PAYMENT_SUCCEEDED)
    failed = await _event(pool, shop, EventKind.PAYMENT_FAILED)
    # Recorded again (same type and subject): nothing new, nothing fanned out twice.
    async with pool.acquire() as conn, conn.transaction():
        subject = await conn.fetchval("SELECT subject_id FROM merchant_events WHERE id = $1", paid)
        assert await record_event(conn, shop, EventKind.PAYMENT_SUCCEEDED, subject, DATA) is None

    async def arrived() -> bool:
        return await _delivered(pool, paid) == 2 and await _delivered(pool, failed) == 1

    await wait_until(arrived, what="three deliveries")
    await asyncio.sleep(0.5)  # anything misrouted would arrive meanwhile
    assert sorted(r.path for r in receiver.received) == ["/every", "/every", "/paid"]
    assert {r.webhook_id for r in receiver.at("every")} == {paid, failed}
    (to_paid,) = receiver.at("paid")
    assert to_paid.webhook_id == paid and to_paid.verifies_with(paid_secret)
    assert all(r.verifies_with(every_secret) for r in receiver.at("every"))
    assert not to_paid.verifies_with(every_secret)  # each endpoint signs with its own
    created = await pool.fetchval("SELECT created_at FROM merchant_events WHERE id = $1", paid)
    # jsonb keeps the data's keys in its own order: the body is the event as stored.
    assert orjson.loads(to_paid.body) == orjson.loads(
        event_body("payment.succeeded", created, DATA)
    )
    assert orjson.loads(to_paid.body)["data"] == DATA
    attempts = await pool.fetch(
        "SELECT a.http_status, a.duration_ms FROM webhook_delivery_attempts a"
        " JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1",
        every,
    )
    assert [a["http_status"] for a in attempts] == [200, 200]


async def test_an_endpoint_down_for_a_while_gets_every_event_under_one_webhook_id(
    pool: asyncpg.Pool, pipe_settings: Settings, start_roles: Start, receiver: Receiver
) -> None:
    settings = pipe_settings.model_copy(update={"retry_tiers_ms": (300, 600, 1200, 2400, 4800)})
    shop, _ = await _merchant(pool, "shop")
    endpoint, secret = await _endpoint(pool, shop, receiver.url("down"), ["*"])
    receiver.status["down"] = 503
    await start_roles(("relay", "worker"), settings=settings, worker_queues=("endpoints",))
    events = [await _event(pool, shop, EventKind.DEPOSIT_CREDITED) for _ in range(3)]
    await wait_until(lambda: _async(len(receiver.at("down")) >= 6), what="failed tries")
    streak = await pool.fetchval(
        "SELECT failing_since FROM webhook_endpoints WHERE id = $1", endpoint
    )
    assert streak is not None
    receiver.status["down"] = 200

    async def all_delivered() -> bool:
        return all([await _delivered(pool, e) == 1 for e in events])

    await wait_until(all_delivered, what="every event delivered once up")
    by_id: dict[str, int] = {}
    for request in receiver.at("down"):
        assert request.verifies_with(secret)
        by_id[request.webhook_id] = by_id.get(request.webhook_id, 0) + 1
    assert set(by_id) == set(events)  # one webhook-id per event, on every retry
    assert any(n > 1 for n in by_id.values())
    assert (
        await pool.fetchval("SELECT failing_since FROM webhook_endpoints WHERE id = $1", endpoint)
        is None
    )


async def _async(value: bool) -> bool:
    return value


async def test_rotation_signs_with_both_secrets_in_the_overlap_then_the_new_alone(
    pool: asyncpg.Pool, start_roles: Start, receiver: Receiver
) -> None:
    shop, _ = await _merchant(pool, "shop")
    endpoint, old = await _endpoint(pool, shop, receiver.url("rot"), ["*"])
    await start_roles(("relay", "worker"), worker_queues=("endpoints",))
    scope = Scope(shop)
    new = new_webhook_secret()
    async with pool.acquire() as conn:
        await rotate_secret(conn, scope, endpoint, new, 3600.0)
    during = await _event(pool, shop, EventKind.PAYOUT_SENT)
    await wait_until(lambda: _delivered(pool, during), what="delivery in the overlap")
    (first,) = receiver.at("rot")
    assert first.verifies_with(old) and first.verifies_with(new)
    assert len(first.headers["webhook-signature"].split(" ")) == 2
    newest = new_webhook_secret()
    async with pool.acquire() as conn:
        await rotate_secret(conn, scope, endpoint, newest, 0.0)  # no overlap: new only
    after = await _event(pool, shop, EventKind.PAYOUT_CONFIRMED)
    await wait_until(lambda: _delivered(pool, after), what="delivery after the overlap")
    second = receiver.at("rot")[1]
    assert second.verifies_with(newest)
    assert not second.verifies_with(new) and not second.verifies_with(old)


async def test_a_worker_killed_mid_send_loses_nothing(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    start_roles: Start,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    """kill -9 of the worker process while the merchant holds the POST: the lease runs
    out, the sweep re-announces the delivery, a new worker sends it under the same id."""
    settings = pipe_settings.model_copy(update={"webhook_sweep_after_s": 1.0})
    shop, _ = await _merchant(pool, "shop")
    _, secret = await _endpoint(pool, shop, receiver.url("slow"), ["*"])
    receiver.hold.add("slow")
    await start_roles(("relay", "scheduler"), settings=settings)
    env = {"WEBHOOK_LEASE_S": "3", "WEBHOOK_TIMEOUT_S": "2"}
    args = ("worker", "--queues", "endpoints")
    first = spawn_role(settings, tmp_path / "first.log", *args, **env)
    second: subprocess.Popen[bytes] | None = None
    try:
        event = await _event(pool, shop, EventKind.PAYMENT_SUCCEEDED)
        await wait_until(lambda: _async(bool(receiver.at("slow"))), limit_s=60, what="the POST")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        receiver.hold.clear()
        second = spawn_role(settings, tmp_path / "second.log", *args, **env)
        await wait_until(lambda: _delivered(pool, event), limit_s=60, what="redelivery")
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=20)
    sent = receiver.at("slow")
    assert len(sent) >= 2 and {r.webhook_id for r in sent} == {event}
    assert all(r.verifies_with(secret) for r in sent)


async def test_a_dead_delivery_reaches_the_dlq_and_its_replay_delivers_it(
    pool: asyncpg.Pool, pipe_settings: Settings, start_roles: Start, receiver: Receiver
) -> None:
    shop, _ = await _merchant(pool, "shop")
    _, secret = await _endpoint(pool, shop, receiver.url("broken"), ["*"])
    receiver.status["broken"] = 500
    await start_roles(("relay", "worker"), worker_queues=("endpoints",))
    event = await _event(pool, shop, EventKind.PAYOUT_FAILED)

    async def dead() -> Any:
        return await pool.fetchrow(
            "SELECT id, attempt FROM dead_letter_queue WHERE source = 'endpoint_delivery'"
        )

    row = await wait_until(dead, what="the DLQ row")
    assert row["attempt"] == len(pipe_settings.retry_tiers_ms) + 1
    receiver.status["broken"] = 200
    resolution = await replay_dead_letter(
        pool, pipe_settings.database, int(row["id"]), operator="test"
    )
    assert resolution.startswith("requeued")
    await wait_until(lambda: _delivered(pool, event), what="the replayed delivery")
    assert {r.webhook_id for r in receiver.at("broken")} == {event}
    assert receiver.at("broken")[-1].verifies_with(secret)


class _Alerts:
    def __init__(self) -> None:
        self.fired: list[str] = []

    async def fire(
        self, key: str, severity: Severity, message: str, *, details: Any = None
    ) -> None:
        self.fired.append(key)

    async def resolve(self, key: str) -> None:
        return None


async def test_an_endpoint_failing_for_days_is_disabled_with_an_alert(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, pipe_settings: Settings
) -> None:
    shop, _ = await _merchant(pool, "shop")
    failing, _ = await _endpoint(pool, shop, "http://127.0.0.1:9/a", ["*"])
    recent, _ = await _endpoint(pool, shop, "http://127.0.0.1:9/b", ["*"])
    await owner_pool.execute(
        "UPDATE webhook_endpoints SET failing_since = now() - interval '6 days' WHERE id = $1",
        failing,
    )
    await owner_pool.execute(
        "UPDATE webhook_endpoints SET failing_since = now() - interval '1 day' WHERE id = $1",
        recent,
    )
    alerts = _Alerts()
    result = await disable_failing_endpoints_job(
        JobContext(pool, pipe_settings, alerts=alerts)  # type: ignore[arg-type]
    )
    assert result.outcome == "alert"
    assert alerts.fired == [f"webhooks.endpoint_disabled:{failing}"]
    rows = {
        r["id"]: r
        for r in await pool.fetch("SELECT id, enabled, disabled_reason FROM webhook_endpoints")
    }
    assert (rows[failing]["enabled"], rows[failing]["disabled_reason"]) == (False, "failing")
    assert rows[recent]["enabled"]
    again = await disable_failing_endpoints_job(JobContext(pool, pipe_settings))
    assert again.outcome == "ok"  # idempotent


@pytest.fixture
async def app(pipe_settings: Settings) -> AsyncIterator[FastAPI]:
    settings = pipe_settings.model_copy(
        update={
            "rate_limit_per_minute": 100_000,
            "provider_webhook_secret": "test-provider-secret-0123456789abcdef",
        }
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield app


def _client(app: FastAPI, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://payflow.test",
        headers={"X-API-Key": key},
    )


async def test_crud_validation_scoping_and_secrets(app: FastAPI, pool: asyncpg.Pool) -> None:
    _, key = await _merchant(pool, "shop")
    _, other_key = await _merchant(pool, "other")
    async with _client(app, key) as api, _client(app, other_key) as other:
        made = await api.post(
            "/api/v1/webhook-endpoints",
            json={"url": "http://127.0.0.1:9/hook", "enabled_events": ["payment.succeeded"]},
        )
        assert made.status_code == 201, made.text
        endpoint = made.json()
        assert endpoint["secret"].startswith("whsec_")
        path = f"/api/v1/webhook-endpoints/{endpoint['id']}"
        read = (await api.get(path)).json()
        assert "secret" not in read and read["enabled_events"] == ["payment.succeeded"]
        listed = (await api.get("/api/v1/webhook-endpoints")).json()
        assert [e["id"] for e in listed["data"]] == [endpoint["id"]]
        assert "secret" not in listed["data"][0]
        # Another merchant sees nothing of it.
        for call in (
            other.get(path),
            other.patch(path, json={"enabled": False}),
            other.delete(path),
            other.post(f"{path}/rotate-secret"),
            other.get(f"{path}/deliveries"),
        ):
            answer = await call
            assert answer.status_code == 404, answer.text
            assert answer.headers["content-type"].startswith("application/problem+json")
        assert (await other.get("/api/v1/webhook-endpoints")).json()["data"] == []
        # Bad input: a clear 4xx problem, never a 500.
        for body in (
            {"url": "http://169.254.169.254/latest", "enabled_events": ["*"]},
            {"url": "ftp://example.com/x"},
            {"url": "http://127.0.0.1:9/h", "enabled_events": ["payment.exploded"]},
            {"url": "http://127.0.0.1:9/h", "enabled_events": ["*", "payment.failed"]},
            {"url": "http://127.0.0.1:9/h", "enabled_events": []},
            {"url": "http://127.0.0.1:9/h", "surprise": 1},
            {"url": 7},
        ):
            answer = await api.post("/api/v1/webhook-endpoints", json=body)
            assert answer.status_code == 422, (body, answer.text)
            assert answer.headers["content-type"].startswith("application/problem+json")
        bad_patch = await api.patch(path, json={"enabled_events": ["nope"]})
        assert bad_patch.status_code == 422
        assert (await api.get("/api/v1/webhook-endpoints/not-a-uuid")).status_code == 422
        # Idempotency-Key optional; with one, a retry replays the same endpoint and secret.
        body = {"url": "http://127.0.0.1:9/again"}
        headers = {"Idempotency-Key": "ep-1"}
        one = await api.post("/api/v1/webhook-endpoints", json=body, headers=headers)
        two = await api.post("/api/v1/webhook-endpoints", json=body, headers=headers)
        assert one.status_code == two.status_code == 201 and one.json() == two.json()
        reused = await api.post(
            "/api/v1/webhook-endpoints", json={"url": "http://127.0.0.1:9/x"}, headers=headers
        )
        assert reused.status_code == 409
        # Patch, rotate, delete.
        patched = (await api.patch(path, json={"enabled": False, "description": "off"})).json()
        assert (patched["enabled"], patched["disabled_reason"]) == (False, "merchant")
        rotated = (await api.post(f"{path}/rotate-secret")).json()
        assert rotated["secret"] != endpoint["secret"]
        assert rotated["secret_rotation_overlap_until"] is not None
        assert (await api.delete(path)).status_code == 204
        assert (await api.get(path)).status_code == 404


async def test_redelivery_is_audited_and_keeps_the_webhook_id(
    app: FastAPI, pool: asyncpg.Pool, start_roles: Start, receiver: Receiver
) -> None:
    shop, key = await _merchant(pool, "shop")
    _, other_key = await _merchant(pool, "other")
    endpoint, secret = await _endpoint(pool, shop, receiver.url("re"), ["*"])
    await start_roles(("relay", "worker"), worker_queues=("endpoints",))
    event = await _event(pool, shop, EventKind.DEPOSIT_PENDING)
    await wait_until(lambda: _delivered(pool, event), what="the first delivery")
    async with _client(app, key) as api, _client(app, other_key) as other:
        refused = await other.post(f"/api/v1/events/{event}/redeliver")
        assert refused.status_code == 404, refused.text
        assert (await other.get(f"/api/v1/events/{event}/deliveries")).status_code == 404
        again = await api.post(
            f"/api/v1/events/{event}/redeliver", json={"endpoint_id": str(endpoint)}
        )
        assert again.status_code == 202, again.text
        await wait_until(lambda: _async(len(receiver.at("re")) == 2), what="the redelivery")
        await wait_until(lambda: _delivered(pool, event), what="delivered again")
        log = (await api.get(f"/api/v1/events/{event}/deliveries")).json()
        page = (await api.get(f"/api/v1/webhook-endpoints/{endpoint}/deliveries")).json()
        unknown = await api.post(
            f"/api/v1/events/{event}/redeliver", json={"endpoint_id": str(uuid.uuid4())}
        )
        assert unknown.status_code == 404
    assert [r.webhook_id for r in receiver.at("re")] == [event, event]
    assert all(r.verifies_with(secret) for r in receiver.at("re"))
    (audit,) = log["redeliveries"]
    assert audit["endpoint_id"] == str(endpoint) and audit["requested_by"].startswith("api:shop:")
    (delivery,) = log["data"]
    assert [a["http_status"] for a in delivery["attempts"]] == [200, 200]
    assert all(a["duration_ms"] >= 0 and a["error"] is None for a in delivery["attempts"])
    assert page["data"][0]["id"] == delivery["id"] and page["next_before"] is None
