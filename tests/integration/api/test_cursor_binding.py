"""A keyset cursor is bound to the listing it was made for: a `next_cursor` of
`GET /api/v1/events?order=desc` sent with `order=asc`, another `type` or other
`created_from`/`created_to` (or a payments cursor with another `status` or time filter)
silently paged another way; it is a 422 on `query.cursor` now. The same filters and
order still page to the end."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx

from tests.integration.api.test_events import _all_pages, _merchant, _seed

PAYMENT = {"amount": "12.5", "currency": "USD"}


async def _cursor(client: httpx.AsyncClient, path: str, params: dict[str, str]) -> str:
    answer = await client.get(path, params={**params, "limit": "1"})
    assert answer.status_code == 200, answer.text
    cursor: str = answer.json()["next_cursor"]
    assert cursor
    return cursor


def _refused(answer: httpx.Response) -> None:
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json()["errors"][0]["field"] == "query.cursor", answer.text
    assert "another order or other filters" in answer.json()["errors"][0]["message"]


async def test_an_event_cursor_is_bound_to_its_order_and_filters(
    app: Any, client: httpx.AsyncClient, owner_pool: asyncpg.Pool
) -> None:
    await _seed(app, owner_pool, await _merchant(app, "bootstrap"))
    made_for = {
        "order": "desc",
        "type": "deposit.pending,payout.held",
        "created_from": "2026-01-01T00:00:00Z",
        "created_to": "2026-01-02T00:00:00Z",
    }
    cursor = await _cursor(client, "/api/v1/events", made_for)
    others = [
        {**made_for, "order": "asc"},
        {**made_for, "type": "payout.held"},
        {k: v for k, v in made_for.items() if k != "type"},
        {**made_for, "created_from": "2026-01-01T01:00:00Z"},
        {**made_for, "created_to": "2026-01-03T00:00:00Z"},
        {k: v for k, v in made_for.items() if k != "created_to"},
    ]
    for params in others:
        _refused(await client.get("/api/v1/events", params={**params, "cursor": cursor}))
    same = {
        **made_for,
        "type": "payout.held,deposit.pending",
        "created_from": "2026-01-01T03:00:00+03:00",
    }
    answer = await client.get("/api/v1/events", params={**same, "cursor": cursor})
    assert answer.status_code == 200, answer.text
    pages = await _all_pages(client, order="asc", limit=2)
    assert sum(len(page) for page in pages) == 6


async def test_a_payment_cursor_is_bound_to_its_filters(client: httpx.AsyncClient) -> None:
    for _ in range(3):
        answer = await client.post(
            "/api/v1/payments", json=PAYMENT, headers={"Idempotency-Key": uuid.uuid4().hex}
        )
        assert answer.status_code == 202, answer.text
    made_for = {"status": "pending", "created_from": "2026-01-01T00:00:00Z"}
    cursor = await _cursor(client, "/api/v1/payments", made_for)
    for params in ({}, {"status": "pending"}, {**made_for, "status": "failed"}):
        _refused(await client.get("/api/v1/payments", params={**params, "cursor": cursor}))
    answer = await client.get("/api/v1/payments", params={**made_for, "cursor": cursor})
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["items"]) == 2


async def test_a_cursor_of_one_listing_is_refused_by_another(
    client: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    for _ in range(2):
        await client.post(
            "/api/v1/payments", json=PAYMENT, headers={"Idempotency-Key": uuid.uuid4().hex}
        )
    cursor = await _cursor(client, "/api/v1/payments", {})
    _refused(await admin.get("/api/v1/admin/unmatched-events", params={"cursor": cursor}))
