"""What the end-to-end webhook tests share: the real app behind an httpx client, a merchant
with its keys, payments made through `POST /api/v1/payments`, and the event stream read
back page by page through `GET /api/v1/events`."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from payflow.app import create_app
from payflow.config import Settings


@pytest.fixture
async def app(pipe_settings: Settings) -> AsyncIterator[FastAPI]:
    """The API app on the test's database and broker, its lifespan run."""
    settings = pipe_settings.model_copy(
        update={
            "rate_limit_per_minute": 100_000,
            "provider_webhook_secret": "test-provider-secret-0123456789abcdef",
        }
    )
    made = create_app(settings)
    async with made.router.lifespan_context(made):
        yield made


def client(app: FastAPI, key: str) -> httpx.AsyncClient:
    """An HTTP client of `app` that sends `key` as `X-API-Key`."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://payflow.test",
        headers={"X-API-Key": key},
    )


async def create_endpoint(api: httpx.AsyncClient, url: str, events: list[str]) -> dict[str, Any]:
    """`POST /api/v1/webhook-endpoints`; the 201 answer (with the secret)."""
    made = await api.post("/api/v1/webhook-endpoints", json={"url": url, "enabled_events": events})
    assert made.status_code == 201, made.text
    body: dict[str, Any] = made.json()
    return body


async def pay(
    api: httpx.AsyncClient, amount: str, currency: str, webhook_url: str | None = None
) -> str:
    """`POST /api/v1/payments` with a fresh Idempotency-Key; the payment id."""
    body: dict[str, Any] = {"amount": amount, "currency": currency}
    if webhook_url is not None:
        body["webhook_url"] = webhook_url
    answer = await api.post(
        "/api/v1/payments", json=body, headers={"Idempotency-Key": uuid.uuid4().hex}
    )
    assert answer.status_code == 202, answer.text
    payment_id: str = answer.json()["payment_id"]
    return payment_id


async def all_events(
    api: httpx.AsyncClient, limit: int, order: str = "asc", **query: str
) -> list[dict[str, Any]]:
    """Every event of the caller's stream in `order` (`asc`: oldest first), read `limit`
    at a time by cursor; `query` adds filters (`type=…`)."""
    events: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit, "order": order, **query}
        if cursor is not None:
            params["cursor"] = cursor
        answer = await api.get("/api/v1/events", params=params)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert len(page["data"]) <= limit
        events.extend(page["data"])
        if not page["has_more"]:
            return events
        cursor = page["next_cursor"]
        assert cursor is not None


async def finished(pool: asyncpg.Pool, payment_ids: list[str]) -> bool:
    """True once every payment left `pending`."""
    ids = [uuid.UUID(p) for p in payment_ids]
    left = await pool.fetchval(
        "SELECT count(*) FROM payments WHERE id = ANY($1::uuid[]) AND status = 'pending'", ids
    )
    done = await pool.fetchval("SELECT count(*) FROM payments WHERE id = ANY($1::uuid[])", ids)
    return int(left) == 0 and int(done) == len(ids)
