"""The merchant's event stream through the API: payments record payment.succeeded /
payment.failed once (the worker's finalize, retried or not), and GET /api/v1/events lists
them with filters and keyset cursors; GET /api/v1/events/{id} reads one."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from payflow.config import Settings
from payflow.db.tx import StatementBounds, transaction
from payflow.payments.charges import claim_first_charge
from payflow.payments.finalize import FAILED, SUCCEEDED, finalize, finalize_answered
from payflow.payments.gateway import ChargeResult
from payflow.payments.records import load_payment
from payflow.webhooks import EventKind, record_event

BOUNDS = StatementBounds(lock_timeout_ms=2000, statement_timeout_ms=5000)
BODY = {
    "amount": "12.5",
    "currency": "USD",
    "description": "order 42",
    "metadata": {"order_id": "42"},
}
EVT = re.compile(r"^evt_[0-9a-f]{32}$")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def _pool(app: Any) -> asyncpg.Pool:
    return app.state.api.pool


async def _create(client: httpx.AsyncClient) -> uuid.UUID:
    response = await client.post(
        "/api/v1/payments", json=BODY, headers={"Idempotency-Key": uuid.uuid4().hex}
    )
    assert response.status_code == 202, response.text
    return uuid.UUID(response.json()["payment_id"])


async def _finalize(pool: asyncpg.Pool, settings: Settings, payment_id: uuid.UUID, status: str):
    async with pool.acquire() as conn, transaction(conn, settings):
        payment = await load_payment(conn, payment_id)
        return await finalize(conn, payment, status, "trace-1")


async def _events(pool: asyncpg.Pool, subject: str) -> list[asyncpg.Record]:
    return await pool.fetch(
        "SELECT id, type, data FROM merchant_events WHERE subject_id = $1", subject
    )


async def test_success_and_failure_are_recorded_once_by_the_finalize(
    app: Any, client: httpx.AsyncClient, api_settings: Settings
) -> None:
    pool = _pool(app)
    paid, declined = await _create(client), await _create(client)
    assert await _finalize(pool, api_settings, paid, SUCCEEDED)
    assert not await _finalize(pool, api_settings, paid, SUCCEEDED)  # a retried finalize
    assert not await _finalize(pool, api_settings, paid, FAILED)
    assert await _finalize(pool, api_settings, declined, FAILED)
    assert not await _finalize(pool, api_settings, declined, FAILED)
    [succeeded] = await _events(pool, str(paid))
    [failed] = await _events(pool, str(declined))
    assert succeeded["type"] == "payment.succeeded" and failed["type"] == "payment.failed"
    data = succeeded["data"]
    assert data == {
        "payment_id": str(paid),
        "status": "succeeded",
        "amount": "12.50",  # at USD's scale, a string
        "currency": "USD",
        "description": "order 42",
        "metadata": {"order_id": "42"},
        "created_at": data["created_at"],
        "processed_at": data["processed_at"],
    }
    assert STAMP.match(data["created_at"]) and STAMP.match(data["processed_at"])
    assert failed["data"]["status"] == "failed"

    response = await client.get(f"/api/v1/events/{succeeded['id']}")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == succeeded["id"] and EVT.match(body["id"])
    assert body["type"] == "payment.succeeded" and body["data"] == data
    assert STAMP.match(body["timestamp"])


async def test_a_rolled_back_finalize_records_nothing_and_the_retry_records_once(
    app: Any, client: httpx.AsyncClient, api_settings: Settings
) -> None:
    pool = _pool(app)
    payment_id = await _create(client)
    with pytest.raises(RuntimeError):
        async with pool.acquire() as conn, transaction(conn, api_settings):
            assert await finalize(conn, await load_payment(conn, payment_id), SUCCEEDED, None)
            raise RuntimeError("the worker dies before its commit")
    assert await _events(pool, str(payment_id)) == []
    assert await _finalize(pool, api_settings, payment_id, SUCCEEDED)
    assert len(await _events(pool, str(payment_id))) == 1


async def test_the_one_statement_answer_records_its_event(
    app: Any, client: httpx.AsyncClient, api_settings: Settings
) -> None:
    pool = _pool(app)
    await _finalize(pool, api_settings, await _create(client), SUCCEEDED)  # opens the account
    payment_id = await _create(client)
    async with pool.acquire() as conn:
        assert (await claim_first_charge(conn, payment_id, "tok", 30.0, BOUNDS))[1] is not None
        payment = await load_payment(conn, payment_id)
        answer = ChargeResult(approved=True, reference="gw-1")
        done = await finalize_answered(conn, payment, answer, None, credit_hold_s=0, bounds=BOUNDS)
        assert done.changed
        again = await finalize_answered(conn, payment, answer, None, credit_hold_s=0, bounds=BOUNDS)
        assert not again.changed
    [event] = await _events(pool, str(payment_id))
    assert event["type"] == "payment.succeeded"


async def _seed(app: Any, owner_pool: asyncpg.Pool, merchant: uuid.UUID) -> list[str]:
    """Six events of `merchant`, an hour apart from 2026-01-01T00:00Z, alternating types;
    their ids oldest first."""
    ids = []
    async with _pool(app).acquire() as conn:
        for n in range(6):
            kind = EventKind.PAYOUT_HELD if n % 2 else EventKind.DEPOSIT_PENDING
            event_id = await record_event(conn, merchant, kind, f"seed-{merchant}-{n}", {"n": n})
            assert event_id is not None
            ids.append(event_id)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n, event_id in enumerate(ids):
        await owner_pool.execute(
            "UPDATE merchant_events SET created_at = $2 WHERE id = $1",
            event_id,
            start + timedelta(hours=n),
        )
    return ids


async def _merchant(app: Any, name: str) -> uuid.UUID:
    query = "SELECT id FROM merchants WHERE name = $1"
    merchant: uuid.UUID = await _pool(app).fetchval(query, name)
    return merchant


async def _all_pages(client: httpx.AsyncClient, **params: Any) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = await client.get("/api/v1/events", params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append([item["id"] for item in body["data"]])
        assert body["has_more"] == (body["next_cursor"] is not None)
        if not body["has_more"]:
            return pages
        cursor = body["next_cursor"]


async def test_list_pages_both_orders_with_filters(
    app: Any, client: httpx.AsyncClient, other: httpx.AsyncClient, owner_pool: asyncpg.Pool
) -> None:
    ids = await _seed(app, owner_pool, await _merchant(app, "bootstrap"))
    await other.get("/api/v1/events")  # the other merchant exists
    # the other merchant's events are never listed for bootstrap
    await _seed(app, owner_pool, await _merchant(app, "other-merchant"))

    assert await _all_pages(client, limit=4, order="asc") == [ids[:4], ids[4:]]
    assert await _all_pages(client, limit=4, order="desc") == [ids[::-1][:4], ids[::-1][4:]]
    assert await _all_pages(client) == [ids[::-1]]  # default: newest first, 20 a page
    assert await _all_pages(client, limit=1, order="asc") == [[i] for i in ids]
    window = {"created_from": "2026-01-01T01:00:00Z", "created_to": "2026-01-01T04:00:00Z"}
    assert await _all_pages(client, limit=2, order="asc", **window) == [ids[1:3], ids[3:4]]
    assert await _all_pages(client, limit=2, order="desc", **window) == [
        [ids[3], ids[2]],
        [ids[1]],
    ]
    assert await _all_pages(client, type="payout.held", order="asc") == [ids[1::2]]
    both = await _all_pages(client, type="payout.held,deposit.pending", order="asc")
    assert both == [ids]
    repeated = await client.get(
        "/api/v1/events", params=[("type", "payout.held"), ("type", "deposit.pending")]
    )
    assert [item["id"] for item in repeated.json()["data"]] == ids[::-1]
    first = (await client.get("/api/v1/events", params={"limit": 1})).json()["data"][0]
    assert first == {
        "id": ids[5],
        "type": "payout.held",
        "timestamp": "2026-01-01T05:00:00.000000Z",
        "data": {"n": 5},
    }


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"type": "payment.refunded"}, "query.type"),
        ({"type": "payout.held,nope"}, "query.type"),
        ({"limit": "0"}, "query.limit"),
        ({"limit": "101"}, "query.limit"),
        ({"limit": "ten"}, "query.limit"),
        ({"order": "sideways"}, "query.order"),
        ({"cursor": "not-a-cursor"}, "query.cursor"),
        ({"cursor": "WyIyMDI2LTAxLTAxVDAwOjAwOjAwKzAwOjAwIiwieCJd"}, "query.cursor"),
        ({"created_from": "1700000000"}, "query.created_from"),
        ({"created_to": "0001-01-01T00:00:00Z"}, "query.created_from/created_to"),
    ],
)
async def test_bad_parameters_are_422_problems(
    client: httpx.AsyncClient, params: dict[str, str], field: str
) -> None:
    response = await client.get("/api/v1/events", params=params)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    fields = [error["field"] for error in problem.get("errors", [])]
    assert field in fields or field in problem.get("detail", ""), problem


async def test_limit_bounds_are_accepted(client: httpx.AsyncClient) -> None:
    for limit in ("1", "100"):
        response = await client.get("/api/v1/events", params={"limit": limit})
        assert response.status_code == 200
        assert response.json() == {"data": [], "has_more": False, "next_cursor": None}


async def test_another_merchants_event_is_404_and_old_ids_still_answer(
    app: Any,
    client: httpx.AsyncClient,
    other: httpx.AsyncClient,
    api_settings: Settings,
    owner_pool: asyncpg.Pool,
) -> None:
    [mine, *_] = await _seed(app, owner_pool, await _merchant(app, "bootstrap"))
    assert (await client.get(f"/api/v1/events/{mine}")).status_code == 200
    hidden = await other.get(f"/api/v1/events/{mine}")
    assert hidden.status_code == 404
    assert hidden.headers["content-type"] == "application/problem+json"
    missing = await client.get(f"/api/v1/events/evt_{'0' * 32}")
    assert missing.status_code == 404
    # a payment's credit is still read by its ledger event id
    payment_id = await _create(client)
    assert await _finalize(_pool(app), api_settings, payment_id, SUCCEEDED)
    credit = await client.get(f"/api/v1/events/payment:{payment_id}")
    assert credit.status_code == 200, credit.text
    assert credit.json()["event_type"] == "payment_credit"
