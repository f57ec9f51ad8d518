"""Webhook endpoints per merchant, on real PostgreSQL and RabbitMQ, against a local HTTP
receiver: fan-out to exactly the endpoints that want an event, retries under one
webhook-id, kill -9 mid-send, rotation (both signatures, then only the new one), the DLQ
and its replay, audited redelivery, scoping (404), auto-disable and CRUD validation.
Every delivery is verified with the `standardwebhooks` library."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from payflow.alerts import Severity
from payflow.api.auth import new_webhook_secret
from payflow.config import Settings
from payflow.jobs.spec import JobContext
from payflow.ops.dlq_replay import replay_dead_letter
from payflow.webhooks import EventKind, event_body, record_event
from payflow.webhooks.endpoints import Scope, rotate_secret
from payflow.webhooks.endpoints.jobs import disable_failing_endpoints_job
from tests.integration.support import wait_until
from tests.integration.webhooks.endpoint_receiver import (
    DATA,
    Receiver,
    Start,
    _async,
    _delivered,
    _endpoint,
    _event,
    _merchant,
)
from tests.processes import spawn_role


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
    # A streak left set by a race (a 2xx recorded while the failure's start committed):
    # a delivery delivered since it began keeps the endpoint.
    stale, _ = await _endpoint(pool, shop, "http://127.0.0.1:9/c", ["payout.sent"])
    await pool.fetchval(
        "SELECT merchant_event_record($1, 'payout.sent', 'po-stale', $2)", shop, DATA
    )
    await owner_pool.execute(
        "UPDATE webhook_deliveries SET state = 'delivered', delivered_at = now() - interval"
        " '2 days' WHERE endpoint_id = $1",
        stale,
    )
    await owner_pool.execute(
        "UPDATE webhook_endpoints SET failing_since = now() - interval '6 days' WHERE id = $1",
        stale,
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
    assert rows[stale]["enabled"]
    again = await disable_failing_endpoints_job(JobContext(pool, pipe_settings))
    assert again.outcome == "ok"  # idempotent


async def test_the_sql_function_fans_out_in_the_callers_transaction(pool: asyncpg.Pool) -> None:
    """`merchant_event_record` as payment_finalize and the other domains call it: the
    event, its deliveries and their outbox rows commit or roll back together; a second
    call for the same cause records nothing."""
    shop, _ = await _merchant(pool, "shop")
    await _endpoint(pool, shop, "http://127.0.0.1:9/a", ["*"])
    await _endpoint(pool, shop, "http://127.0.0.1:9/b", ["payout.sent"])
    record = "SELECT merchant_event_record($1, $2, $3, $4)"
    async with pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        assert await conn.fetchval(record, shop, "payment.succeeded", "pay-1", DATA)
        await tx.rollback()
        assert await conn.fetchval("SELECT count(*) FROM webhook_deliveries") == 0
        assert await conn.fetchval("SELECT count(*) FROM outbox") == 0
        async with conn.transaction():
            event_id = await conn.fetchval(record, shop, "payment.succeeded", "pay-1", DATA)
            assert await conn.fetchval(record, shop, "payment.succeeded", "pay-1", DATA) is None
        rows = await conn.fetch("SELECT o.payload FROM outbox o WHERE o.topic = 'endpoint.deliver'")
        deliveries = await conn.fetch(
            "SELECT id FROM webhook_deliveries WHERE event_id = $1", event_id
        )
    assert len(deliveries) == 1  # only the endpoint that wants every type
    # The service role records through the function only: no event without its deliveries.
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await pool.execute(
            "INSERT INTO merchant_events (id, merchant_id, type, subject_id, data)"
            " VALUES ('evt_' || repeat('0', 32), $1, 'payment.failed', 'x', '{}')",
            shop,
        )
    assert [r["payload"] for r in rows] == [{"version": 1, "delivery_id": deliveries[0]["id"]}]
