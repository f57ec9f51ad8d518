"""The merchant integration end to end, on real PostgreSQL, RabbitMQ, the gateway emulator
and anvil: a payment made through the HTTP API reaches the endpoint that wants it (and the
payment's own webhook_url, unchanged), a declined one delivers payment.failed, a merchant
whose endpoint is down catches up through `GET /api/v1/events` and then receives every
event under one webhook-id, a chain deposit delivers deposit.pending then
deposit.credited, and a read key reads but changes nothing. Every endpoint delivery is
verified with the `standardwebhooks` library."""

from __future__ import annotations

import uuid

import asyncpg
import orjson
from fastapi import FastAPI
from redis.asyncio import Redis

from payflow.chain.finality import FinalityOracle
from payflow.config import Settings
from payflow.webhooks import EventKind
from payflow_lab.anvil import WEI_PER_ETH, AnvilNode
from payflow_lab.ports import free_port
from tests.integration.chain.conftest import anvil
from tests.integration.chain.deposit_support import chain_settings, deliver, generic_event, run
from tests.integration.chain.test_deposit_events import _merchant_account
from tests.integration.support import wait_until
from tests.integration.webhooks.e2e_support import (
    all_events,
    app,
    client,
    create_endpoint,
    finished,
    pay,
)
from tests.integration.webhooks.endpoint_receiver import (
    Receiver,
    Start,
    _async,
    _endpoint,
    _event,
    _merchant,
)

__all__ = ["anvil", "app"]  # fixtures


async def _deliveries(pool: asyncpg.Pool, endpoint_id: str, state: str) -> int:
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND state = $2",
            uuid.UUID(endpoint_id),
            state,
        )
    )


async def test_a_payment_through_the_api_reaches_its_endpoint_and_its_webhook_url(
    app: FastAPI, pool: asyncpg.Pool, start_roles: Start, receiver: Receiver
) -> None:
    _, key = await _merchant(pool, "shop")
    await start_roles()
    async with client(app, key) as api:
        wants = await create_endpoint(api, receiver.url("payments"), ["payment.succeeded"])
        payouts = await create_endpoint(
            api, receiver.url("payouts"), ["payout.held", "payout.sent", "payout.confirmed"]
        )
        payment_id = await pay(api, "12.50", "USD", webhook_url=receiver.url("seed"))
        await wait_until(
            lambda: _async(bool(receiver.at("payments")) and bool(receiver.at("seed"))),
            what="the endpoint delivery and the payment's webhook",
        )
        (event,) = await all_events(api, 10)
        read = await api.get(f"/api/v1/events/{event['id']}")
        assert read.status_code == 200 and read.json() == event
        log = (await api.get(f"/api/v1/events/{event['id']}/deliveries")).json()
        await wait_until(lambda: _deliveries(pool, wants["id"], "delivered"), what="recorded")
    assert event["type"] == "payment.succeeded"
    assert event["data"]["payment_id"] == payment_id
    (delivery,) = receiver.at("payments")
    assert delivery.verifies_with(wants["secret"])
    assert not delivery.verifies_with(payouts["secret"])
    assert delivery.webhook_id == event["id"]
    body = orjson.loads(delivery.body)
    assert set(body) == {"type", "timestamp", "data"}
    assert body["type"] == "payment.succeeded"
    assert body["data"]["payment_id"] == payment_id
    assert body["data"]["amount"] == "12.50" and body["data"]["currency"] == "USD"
    assert body["data"]["status"] == "succeeded"
    assert body["data"] == event["data"]
    # The payment's own webhook_url: the seed's body, untouched by the endpoints.
    (seed,) = receiver.at("seed")
    assert orjson.loads(seed.body) == {
        "payment_id": payment_id,
        "status": "succeeded",
        "amount": "12.50",
        "currency": "USD",
    }
    assert seed.webhook_id != event["id"]
    # The payout-only endpoint got nothing and has nothing queued.
    assert receiver.at("payouts") == []
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1",
            uuid.UUID(payouts["id"]),
        )
        == 0
    )
    assert [d["endpoint_id"] for d in log["data"]] == [wants["id"]]


async def test_a_declined_payment_delivers_payment_failed_to_the_endpoint_that_wants_it(
    app: FastAPI,
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    start_roles: Start,
    receiver: Receiver,
) -> None:
    _, key = await _merchant(pool, "shop")
    await start_roles(settings=pipe_settings.model_copy(update={"gateway_failure_rate": 1.0}))
    async with client(app, key) as api:
        failed = await create_endpoint(api, receiver.url("failed"), ["payment.failed"])
        await create_endpoint(api, receiver.url("succeeded"), ["payment.succeeded"])
        payment_id = await pay(api, "3.10", "RUB", webhook_url=receiver.url("seed"))
        await wait_until(
            lambda: _async(bool(receiver.at("failed")) and bool(receiver.at("seed"))),
            what="the endpoint delivery and the payment's webhook",
        )
        (event,) = await all_events(api, 10)
    (delivery,) = receiver.at("failed")
    assert delivery.verifies_with(failed["secret"]) and delivery.webhook_id == event["id"]
    body = orjson.loads(delivery.body)
    assert body["type"] == event["type"] == "payment.failed"
    assert body["data"] == event["data"]
    assert (body["data"]["payment_id"], body["data"]["status"]) == (payment_id, "failed")
    assert body["data"]["amount"] == "3.10"
    assert orjson.loads(receiver.at("seed")[0].body) == {
        "payment_id": payment_id,
        "status": "failed",
        "amount": "3.10",
        "currency": "RUB",
    }
    assert receiver.at("succeeded") == []


async def test_a_merchant_whose_endpoint_is_down_catches_up_through_the_event_stream(
    app: FastAPI, pool: asyncpg.Pool, pipe_settings: Settings, start_roles: Start
) -> None:
    # Tiers long enough (15.5 s in all) that the deliveries are still retrying when the
    # endpoint comes back.
    settings = pipe_settings.model_copy(update={"retry_tiers_ms": (500, 1000, 2000, 4000, 8000)})
    _, key = await _merchant(pool, "shop")
    port = free_port()  # nothing listens there yet: connection refused
    await start_roles(settings=settings)
    async with client(app, key) as api:
        endpoint = await create_endpoint(api, f"http://127.0.0.1:{port}/down", ["*"])
        amounts = ["1.00", "2.00", "3.00", "4.00", "5.00"]
        payments = [await pay(api, amount, "EUR") for amount in amounts]
        await wait_until(lambda: finished(pool, payments), what="every payment finished")
        await wait_until(
            lambda: pool.fetchval(
                "SELECT count(DISTINCT d.event_id) = 5 FROM webhook_delivery_attempts a"
                " JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1",
                uuid.UUID(endpoint["id"]),
            ),
            what="a failed attempt per event",
        )
        events = await all_events(api, 2)  # three pages
        newest_first = await all_events(api, 2, order="desc", type="payment.succeeded")
        assert await all_events(api, 10, type="payment.failed,deposit.credited") == []
        assert await _deliveries(pool, endpoint["id"], "delivered") == 0
    # Every payment's event exactly once, as the payments were.
    assert len(events) == len({e["id"] for e in events}) == 5
    assert newest_first == events[::-1]
    assert {e["type"] for e in events} == {"payment.succeeded"}
    assert sorted((e["data"]["payment_id"], e["data"]["amount"]) for e in events) == sorted(
        zip(payments, amounts, strict=True)
    )
    back = Receiver(port=port)
    await back.start()
    try:
        await wait_until(
            lambda: _async(len({r.webhook_id for r in back.at("down")}) == 5),
            what="every event delivered once the endpoint is back",
        )
        await wait_until(
            lambda: _deliveries_done(pool, endpoint["id"]), what="every delivery recorded"
        )
    finally:
        await back.stop()
    assert {r.webhook_id for r in back.at("down")} == {e["id"] for e in events}
    assert all(r.verifies_with(endpoint["secret"]) for r in back.at("down"))
    by_id = {r.webhook_id: orjson.loads(r.body) for r in back.at("down")}
    for event in events:
        assert by_id[event["id"]]["data"] == event["data"]
    assert await _deliveries(pool, endpoint["id"], "dead") == 0


async def _deliveries_done(pool: asyncpg.Pool, endpoint_id: str) -> bool:
    return await _deliveries(pool, endpoint_id, "delivered") == 5


async def test_a_chain_deposit_delivers_pending_then_credited(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    database_url: str,
    migration_url: str,
    start_roles: Start,
    receiver: Receiver,
) -> None:
    settings = chain_settings(
        database_url, migration_url, anvil.url, eth_confirmation_policy="confirmations:1"
    )
    merchant, account, address = await _merchant_account(pool, owner_pool, settings)
    _, secret = await _endpoint(
        pool, merchant, receiver.url("deposits"), ["deposit.pending", "deposit.credited"]
    )
    await start_roles(("relay", "worker"), worker_queues=("endpoints",))
    await anvil.mine(2)
    tx = await anvil.send_eth(address, WEI_PER_ETH)
    await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
    redis = Redis.from_url(settings.redis_url)
    oracle = FinalityOracle(settings, redis, redis_settings=settings)
    try:
        await run(pool, settings, oracle)  # verified: deposit.pending
        await wait_until(lambda: _async(len(receiver.at("deposits")) == 1), what="pending")
        await anvil.mine(1)
        assert (await run(pool, settings, oracle)).credited == 1
        await wait_until(lambda: _async(len(receiver.at("deposits")) == 2), what="credited")
    finally:
        await oracle.aclose()
        keys = [k async for k in redis.scan_iter(match=settings.redis_key_prefix + "*")]
        if keys:
            await redis.delete(*keys)
        await redis.aclose()
    bodies = [orjson.loads(r.body) for r in receiver.at("deposits")]
    assert [b["type"] for b in bodies] == ["deposit.pending", "deposit.credited"]
    assert all(r.verifies_with(secret) for r in receiver.at("deposits"))
    for body in bodies:
        assert body["data"]["account_id"] == str(account)
        assert body["data"]["address"] == address
        assert body["data"]["amount"] == "1.000000000000000000"
        assert body["data"]["tx_hash"] == tx.lower()
    assert bodies[1]["data"]["credited_amount"] == "1.000000000000000000"
    stored = await pool.fetch(
        "SELECT id FROM merchant_events WHERE merchant_id = $1 ORDER BY created_at", merchant
    )
    assert [r.webhook_id for r in receiver.at("deposits")] == [row["id"] for row in stored]


async def test_a_read_key_reads_but_changes_nothing_and_another_merchant_sees_nothing(
    app: FastAPI, pool: asyncpg.Pool, start_roles: Start, receiver: Receiver
) -> None:
    _, key = await _merchant(pool, "shop")
    other, other_key = await _merchant(pool, "other")
    await start_roles()
    async with client(app, key) as api:
        endpoint = await create_endpoint(api, receiver.url("shop"), ["*"])
        payment_id = await pay(api, "7.00", "RUB")
        await wait_until(lambda: finished(pool, [payment_id]), what="the payment finished")
        made = await api.post("/api/v1/api-keys", json={"name": "reader", "scope": "read"})
        assert made.status_code == 201, made.text
        reader_key = made.json()
        keys = (await api.get("/api/v1/api-keys")).json()["items"]
    (event,) = [e for e in await _stream(app, reader_key["key"])]
    assert event["data"]["payment_id"] == payment_id
    endpoint_path = f"/api/v1/webhook-endpoints/{endpoint['id']}"
    async with client(app, reader_key["key"]) as reader:
        listed = (await reader.get("/api/v1/webhook-endpoints")).json()
        assert [e["id"] for e in listed["data"]] == [endpoint["id"]]
        assert (await reader.get(endpoint_path)).status_code == 200
        assert (await reader.get(f"/api/v1/events/{event['id']}/deliveries")).status_code == 200
        for call in (
            reader.post("/api/v1/webhook-endpoints", json={"url": receiver.url("x")}),
            reader.post(f"{endpoint_path}/rotate-secret"),
            reader.post(f"/api/v1/events/{event['id']}/redeliver"),
            reader.patch(endpoint_path, json={"enabled": False}),
        ):
            answer = await call
            assert answer.status_code == 403, answer.text
            assert answer.headers["content-type"].startswith("application/problem+json")
    # Nothing was changed by the refusals.
    assert await pool.fetchval("SELECT count(*) FROM webhook_endpoints") == 1
    assert await pool.fetchval("SELECT count(*) FROM webhook_redeliveries") == 0
    assert await pool.fetchval("SELECT enabled AND previous_secret IS NULL FROM webhook_endpoints")
    # Another merchant: 404 on every one of the shop's events, endpoints and keys.
    other_event = await _event(pool, other, EventKind.PAYOUT_HELD)
    async with client(app, other_key) as stranger:
        for path in (
            f"/api/v1/events/{event['id']}",
            f"/api/v1/events/{event['id']}/deliveries",
            endpoint_path,
            f"{endpoint_path}/deliveries",
            *(f"/api/v1/api-keys/{k['id']}" for k in keys),
            f"/api/v1/api-keys/{reader_key['id']}",
        ):
            answer = await stranger.get(path)
            assert answer.status_code == 404, (path, answer.text)
        redeliver = await stranger.post(f"/api/v1/events/{event['id']}/redeliver")
        assert redeliver.status_code == 404
        assert [e["id"] for e in await all_events(stranger, 10)] == [other_event]
        assert (await stranger.get("/api/v1/webhook-endpoints")).json()["data"] == []
    async with client(app, reader_key["key"]) as reader:
        assert (await reader.get(f"/api/v1/events/{other_event}")).status_code == 404


async def _stream(app: FastAPI, key: str) -> list[dict[str, object]]:
    async with client(app, key) as api:
        return await all_events(api, 10)
