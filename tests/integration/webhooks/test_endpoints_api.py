"""The webhook endpoint API on real PostgreSQL and RabbitMQ: CRUD validation (4xx
problems, never a 500), another merchant's endpoints and events 404, the secret shown
only on create and rotate, optional Idempotency-Key, and audited redelivery under the
same webhook-id, verified with the `standardwebhooks` library."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from payflow.api.routes.webhook_deliveries import (
    DeliveryPage,
    EventDeliveries,
    RedeliveryAnswer,
)
from payflow.api.routes.webhook_endpoints import EndpointPage
from payflow.app import create_app
from payflow.config import Settings
from payflow.webhooks import EventKind
from payflow.webhooks.endpoints.store import MAX_ENDPOINTS
from tests.integration.support import wait_until
from tests.integration.webhooks.endpoint_receiver import (
    Receiver,
    Start,
    _async,
    _delivered,
    _endpoint,
    _event,
    _merchant,
)


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
            {"url": "https://ex%2e.com/x"},  # no resolver finds a host holding `%`
            {"url": "https://[v1.x]/x"},  # brackets hold IPv6 only
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
        # `enabled` is a JSON boolean: "yes", "false", 0 or 1 are refused, never coerced
        # (so a create with `"enabled": "no"` does not make an enabled endpoint).
        for flag in ("yes", "no", "false", 0, 1):
            answer = await api.post(
                "/api/v1/webhook-endpoints", json={"url": "http://127.0.0.1:9/h", "enabled": flag}
            )
            assert answer.status_code == 422, (flag, answer.text)
            assert answer.json()["errors"][0]["field"] == "body.enabled"
            answer = await api.patch(path, json={"enabled": flag})
            assert answer.status_code == 422, (flag, answer.text)
        assert (await api.get(path)).json()["enabled"] is True
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
        listed = (await api.get("/api/v1/webhook-endpoints")).json()
        page = (await api.get(f"/api/v1/webhook-endpoints/{endpoint}/deliveries")).json()
        unknown = await api.post(
            f"/api/v1/events/{event}/redeliver", json={"endpoint_id": str(uuid.uuid4())}
        )
        assert unknown.status_code == 404
    assert [r.webhook_id for r in receiver.at("re")] == [event, event]
    assert all(r.verifies_with(secret) for r in receiver.at("re"))
    (audit,) = log["redeliveries"]
    key_id = await pool.fetchval("SELECT id FROM api_keys WHERE merchant_id = $1", shop)
    assert audit["endpoint_id"] == str(endpoint) and audit["requested_by"] == f"api:key:{key_id}"
    (delivery,) = log["data"]
    assert [a["http_status"] for a in delivery["attempts"]] == [200, 200]
    assert all(a["duration_ms"] >= 0 and a["error"] is None for a in delivery["attempts"])
    assert page["data"][0]["id"] == delivery["id"] and page["next_before"] is None
    # The answers are what /openapi.json says they are (every field, nothing more).
    for model, answer in (
        (EventDeliveries, log),
        (DeliveryPage, page),
        (RedeliveryAnswer, again.json()),
        (EndpointPage, listed),
    ):
        assert model.model_validate(answer).model_dump(exclude_unset=True) == answer, model.__name__


async def test_a_merchant_holds_at_most_the_cap_of_endpoints(
    app: FastAPI, pool: asyncpg.Pool
) -> None:
    """Each endpoint multiplies every money event (its deliveries are written in the
    event's transaction, each one a POST): a key cannot make thousands. Creations racing
    at the cap cannot pass it; deleted endpoints do not count; another merchant's cap is
    its own."""
    shop, key = await _merchant(pool, "shop")
    _, other_key = await _merchant(pool, "other")
    async with _client(app, key) as api, _client(app, other_key) as other:
        for n in range(MAX_ENDPOINTS - 3):
            made = await api.post(
                "/api/v1/webhook-endpoints", json={"url": f"http://127.0.0.1:9/{n}"}
            )
            assert made.status_code == 201, made.text
        racing = await asyncio.gather(
            *(
                api.post("/api/v1/webhook-endpoints", json={"url": f"http://127.0.0.1:9/r{n}"})
                for n in range(8)
            )
        )
        assert sorted(r.status_code for r in racing) == [201] * 3 + [409] * 5
        refused = next(r for r in racing if r.status_code == 409)
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert f"at most {MAX_ENDPOINTS}" in refused.json()["detail"]
        count = "SELECT count(*) FROM webhook_endpoints WHERE merchant_id = $1"
        assert await pool.fetchval(count, shop) == MAX_ENDPOINTS
        assert (
            await other.post("/api/v1/webhook-endpoints", json={"url": "http://127.0.0.1:9/o"})
        ).status_code == 201
        first = (await api.get("/api/v1/webhook-endpoints")).json()["data"][0]["id"]
        assert (await api.delete(f"/api/v1/webhook-endpoints/{first}")).status_code == 204
        again = await api.post("/api/v1/webhook-endpoints", json={"url": "http://127.0.0.1:9/z"})
        assert again.status_code == 201, again.text


async def test_paging_goes_on_when_the_last_endpoint_of_a_page_is_deleted(
    app: FastAPI, pool: asyncpg.Pool
) -> None:
    """`after` names where a page ended: deleting that endpoint meanwhile must not turn
    the next page into a 404 (a client paging while another deletes). An id never in the
    caller's scope stays a 404."""
    _, key = await _merchant(pool, "shop")
    _, other_key = await _merchant(pool, "other")
    async with _client(app, key) as api, _client(app, other_key) as other:
        made = [
            (
                await api.post("/api/v1/webhook-endpoints", json={"url": f"http://127.0.0.1:9/{n}"})
            ).json()["id"]
            for n in range(3)
        ]
        first = (await api.get("/api/v1/webhook-endpoints", params={"limit": 1})).json()
        assert [e["id"] for e in first["data"]] == made[:1] and first["next_after"] == made[0]
        assert (await api.delete(f"/api/v1/webhook-endpoints/{made[0]}")).status_code == 204
        rest = await api.get("/api/v1/webhook-endpoints", params={"after": made[0]})
        assert rest.status_code == 200, rest.text
        assert [e["id"] for e in rest.json()["data"]] == made[1:]
        # Scope holds: another merchant's endpoint, deleted or not, is not a position.
        for endpoint in (made[0], made[1]):
            answer = await other.get("/api/v1/webhook-endpoints", params={"after": endpoint})
            assert answer.status_code == 404, answer.text
        unknown = await api.get("/api/v1/webhook-endpoints", params={"after": str(uuid.uuid4())})
        assert unknown.status_code == 404
