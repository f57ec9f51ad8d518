"""The endpoint store owns its rules: `create_endpoint` and `update_endpoint` check the
event types (`valid_events`) and the description (`checked_description`) themselves, so
a caller that skipped them (a script, a future route) gets the domain's `BadInput`, the
API's 422, instead of an endpoint subscribed to "deposit.*" that nothing ever matches."""

from __future__ import annotations

import asyncpg
import pytest
from fastapi import FastAPI

from payflow.api.auth import new_webhook_secret
from payflow.errors import BadInput
from payflow.webhooks.endpoints import Scope, create_endpoint, update_endpoint
from tests.integration.webhooks.endpoint_receiver import _endpoint, _merchant
from tests.integration.webhooks.test_endpoints_api import _client, app  # noqa: F401

URL = "http://127.0.0.1:9/hook"


@pytest.mark.parametrize(
    "events", [["deposit.*"], ["payment.succeeded", "nope"], [], ["*", "payout.sent"]]
)
async def test_the_store_refuses_unknown_event_types(pool: asyncpg.Pool, events: list[str]) -> None:
    shop, _ = await _merchant(pool, "shop")
    async with pool.acquire() as conn:
        with pytest.raises(BadInput):
            await create_endpoint(conn, shop, url=URL, events=events, secret=new_webhook_secret())
    endpoint, _ = await _endpoint(pool, shop, URL, ["*"])
    async with pool.acquire() as conn:
        with pytest.raises(BadInput):
            await update_endpoint(conn, Scope(shop), endpoint, events=events)
    stored = await pool.fetch("SELECT enabled_events FROM webhook_endpoints")
    assert [row["enabled_events"] for row in stored] == [["*"]]


async def test_the_store_refuses_a_description_free_text_may_not_hold(
    pool: asyncpg.Pool,
) -> None:
    shop, _ = await _merchant(pool, "shop")
    async with pool.acquire() as conn:
        for bad in ("a\x01b", "x\u202ey", "d" * 501):
            with pytest.raises(BadInput):
                await create_endpoint(
                    conn, shop, url=URL, events=["*"], secret="whsec_x", description=bad
                )
    endpoint, _ = await _endpoint(pool, shop, URL, ["*"])
    async with pool.acquire() as conn:
        with pytest.raises(BadInput):
            await update_endpoint(conn, Scope(shop), endpoint, description="\u2066b")
    assert await pool.fetchval("SELECT description FROM webhook_endpoints") == ""


async def test_the_api_answers_422_for_a_description_with_controls(
    app: FastAPI,  # noqa: F811
    pool: asyncpg.Pool,
) -> None:
    shop, key = await _merchant(pool, "shop")
    endpoint, _ = await _endpoint(pool, shop, URL, ["*"])
    async with _client(app, key) as api:
        for bad in ("a\x01b", "invoice\u202egnp.exe", "a\u2069b", "a\x9bb"):
            made = await api.post(
                "/api/v1/webhook-endpoints", json={"url": URL, "description": bad}
            )
            patched = await api.patch(
                f"/api/v1/webhook-endpoints/{endpoint}", json={"description": bad}
            )
            for answer in (made, patched):
                assert answer.status_code == 422, answer.text
                assert answer.headers["content-type"].startswith("application/problem+json")
                assert answer.json()["errors"][0]["field"] == "body.description", answer.text
        paid = await api.post(
            "/api/v1/payments",
            json={"amount": "1.00", "currency": "USD", "description": "a\u202eb"},
            headers={"Idempotency-Key": "free-text-1"},
        )
        assert paid.status_code == 422, paid.text
        assert paid.json()["errors"][0]["field"] == "body.description", paid.text
    assert await pool.fetchval("SELECT count(*) FROM webhook_endpoints") == 1
