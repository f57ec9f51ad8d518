"""POST/GET /api/v1/payments: the seed-004 contract, idempotency and tenancy."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import orjson

BODY: dict[str, Any] = {
    "amount": "10.00",
    "currency": "RUB",
    "description": "test payment",
    "metadata": {"order_id": "42"},
    "webhook_url": "http://127.0.0.1:9/hook",
}


def key() -> dict[str, str]:
    return {"Idempotency-Key": f"order-{uuid.uuid4().hex}"}


async def _count(app: Any, sql: str) -> int:
    async with app.state.api.pool.acquire() as conn:
        value: int = await conn.fetchval(sql)
    return value


async def test_create_answers_202_and_writes_payment_idempotency_and_outbox(
    app: Any, client: httpx.AsyncClient
) -> None:
    response = await client.post("/api/v1/payments", json=BODY, headers=key())
    assert response.status_code == 202, response.text
    body = response.json()
    assert set(body) == {"payment_id", "status", "created_at"}
    assert body["status"] == "pending"
    assert body["created_at"].endswith("Z")
    assert response.headers["x-request-id"]
    assert await _count(app, "SELECT count(*) FROM payments") == 1
    assert await _count(app, "SELECT count(*) FROM api_idempotency") == 1
    async with app.state.api.pool.acquire() as conn:
        outbox = await conn.fetch("SELECT topic, payload, trace_id FROM outbox")
    assert [(row["topic"], row["payload"]) for row in outbox] == [
        ("payment.created", {"version": 1, "payment_id": body["payment_id"]})
    ]
    assert outbox[0]["trace_id"] == response.headers["x-request-id"]


async def test_get_returns_every_seed_field(client: httpx.AsyncClient) -> None:
    headers = key()
    created = (await client.post("/api/v1/payments", json=BODY, headers=headers)).json()
    response = await client.get(f"/api/v1/payments/{created['payment_id']}")
    assert response.status_code == 200
    assert response.json() == {
        "payment_id": created["payment_id"],
        "amount": "10.00",
        "currency": "RUB",
        "description": "test payment",
        "metadata": {"order_id": "42"},
        "status": "pending",
        "idempotency_key": headers["Idempotency-Key"],
        "webhook_url": "http://127.0.0.1:9/hook",
        "webhook_delivered_at": None,
        "webhook_attempts": 0,
        "created_at": created["created_at"],
        "processed_at": None,
    }


async def test_same_key_same_body_replays_identical_response(
    app: Any, client: httpx.AsyncClient
) -> None:
    headers = key()
    first = await client.post("/api/v1/payments", json=BODY, headers=headers)
    # Same JSON with another key order and spacing is the same request.
    raw = orjson.dumps(dict(reversed(list(BODY.items()))))
    second = await client.post(
        "/api/v1/payments",
        content=raw,
        headers={**headers, "Content-Type": "application/json"},
    )
    assert second.status_code == 202
    assert second.content == first.content
    assert await _count(app, "SELECT count(*) FROM payments") == 1
    assert await _count(app, "SELECT count(*) FROM outbox") == 1


async def test_same_key_different_body_is_409(app: Any, client: httpx.AsyncClient) -> None:
    headers = key()
    await client.post("/api/v1/payments", json=BODY, headers=headers)
    response = await client.post(
        "/api/v1/payments", json={**BODY, "amount": "11.00"}, headers=headers
    )
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["type"].endswith("idempotency-key-reused")
    assert await _count(app, "SELECT count(*) FROM payments") == 1


async def test_keys_are_scoped_per_merchant(
    app: Any, client: httpx.AsyncClient, other: httpx.AsyncClient
) -> None:
    headers = key()
    first = await client.post("/api/v1/payments", json=BODY, headers=headers)
    second = await other.post("/api/v1/payments", json={**BODY, "amount": "5"}, headers=headers)
    assert first.status_code == second.status_code == 202
    assert first.json()["payment_id"] != second.json()["payment_id"]


async def test_in_flight_key_answers_409_in_progress(app: Any, client: httpx.AsyncClient) -> None:
    from payflow.idempotency.records import lock_key
    from payflow.payments.service import CREATE_SCOPE

    headers = key()
    async with app.state.api.pool.acquire() as conn:
        merchant_id = await conn.fetchval("SELECT id FROM merchants WHERE name = 'bootstrap'")
        async with conn.transaction():
            # Hold the key's lock as a first, still running request would.
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1)",
                lock_key(merchant_id, CREATE_SCOPE, headers["Idempotency-Key"]),
            )
            response = await client.post("/api/v1/payments", json=BODY, headers=headers)
    assert response.status_code == 409
    assert response.json()["type"].endswith("idempotency-in-progress")
    assert response.headers["retry-after"] == "1"
    after = await client.post("/api/v1/payments", json=BODY, headers=headers)
    assert after.status_code == 202


async def test_missing_idempotency_key_is_422(app: Any, client: httpx.AsyncClient) -> None:
    response = await client.post("/api/v1/payments", json=BODY)
    assert response.status_code == 422
    problem = response.json()
    assert problem["status"] == 422
    assert any(error["field"] == "header.Idempotency-Key" for error in problem["errors"])
    assert await _count(app, "SELECT count(*) FROM payments") == 0


async def test_json_number_amount_is_422_with_reason(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/v1/payments", json={**BODY, "amount": 10.0}, headers=key())
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert errors[0]["field"] == "body.amount"
    assert "not a JSON number" in errors[0]["message"]


async def test_json_boolean_amount_is_named_as_such(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/v1/payments", json={**BODY, "amount": True}, headers=key())
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error == {
        "field": "body.amount",
        "message": 'amount must be a decimal string such as "10.00", not a JSON boolean',
    }


async def test_invalid_bodies_name_the_field(client: httpx.AsyncClient) -> None:
    cases = [
        ({**BODY, "amount": "0"}, "body.amount"),
        ({**BODY, "amount": "-1"}, "body.amount"),
        ({**BODY, "amount": "1.001"}, "body.amount"),
        ({**BODY, "currency": "XXX"}, "body.currency"),
        ({**BODY, "description": "x" * 513}, "body.description"),
        ({**BODY, "metadata": {"big": "x" * 5000}}, "body.metadata"),
        ({**BODY, "metadata": [1]}, "body.metadata"),
        ({**BODY, "webhook_url": "http://10.0.0.1/hook"}, "body.webhook_url"),
        ({**BODY, "webhook_url": "http://169.254.169.254/latest"}, "body.webhook_url"),
        ({**BODY, "webhook_url": "ftp://example.com/x"}, "body.webhook_url"),
        ({**BODY, "webhook_url": "http://[64:ff9b::7f00:1]/hook"}, "body.webhook_url"),
        ({**BODY, "webhook_url": "http://[2002:a9fe:a9fe::1]/hook"}, "body.webhook_url"),
        # A public address spelled so that no delivery could reach it.
        ({**BODY, "webhook_url": "http://134744072/hook"}, "body.webhook_url"),
        ({**BODY, "webhook_url": "http://8.8.8.8./hook"}, "body.webhook_url"),
        ({**BODY, "webhook_url": "http://8.8.2056/hook"}, "body.webhook_url"),
        ({**BODY, "unexpected": 1}, "body.unexpected"),
    ]
    for body, field in cases:
        response = await client.post("/api/v1/payments", json=body, headers=key())
        assert response.status_code == 422, (body, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert field in [error["field"] for error in response.json()["errors"]], response.text


async def test_malformed_json_is_a_problem_not_500(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/api/v1/payments",
        content=b'{"amount": ',
        headers={**key(), "Content-Type": "application/json"},
    )
    assert response.status_code in (400, 422)
    assert response.headers["content-type"] == "application/problem+json"


async def test_oversized_body_is_413(client: httpx.AsyncClient) -> None:
    big = {**BODY, "description": "x" * 70_000}
    response = await client.post("/api/v1/payments", json=big, headers=key())
    assert response.status_code == 413
    assert response.json()["status"] == 413


async def test_cross_tenant_read_is_404(
    client: httpx.AsyncClient, other: httpx.AsyncClient
) -> None:
    created = (await client.post("/api/v1/payments", json=BODY, headers=key())).json()
    response = await other.get(f"/api/v1/payments/{created['payment_id']}")
    assert response.status_code == 404
    assert (await other.get("/api/v1/payments")).json()["items"] == []
    unknown = await client.get(f"/api/v1/payments/{uuid.uuid4()}")
    assert unknown.status_code == 404
    assert unknown.json()["detail"].startswith("payment ")


async def test_list_paginates_and_filters(app: Any, client: httpx.AsyncClient) -> None:
    ids = []
    for _ in range(5):
        ids.append((await client.post("/api/v1/payments", json=BODY, headers=key())).json())
    async with app.state.api.pool.acquire() as conn:
        await conn.execute(
            "UPDATE payments SET status = 'failed', processed_at = now() WHERE id = $1",
            uuid.UUID(ids[0]["payment_id"]),
        )
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get("/api/v1/payments", params=params)).json()
        seen.extend(item["payment_id"] for item in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [item["payment_id"] for item in reversed(ids)]
    failed = (await client.get("/api/v1/payments", params={"status": "failed"})).json()
    assert [item["payment_id"] for item in failed["items"]] == [ids[0]["payment_id"]]
    later = (
        await client.get("/api/v1/payments", params={"created_from": "2999-01-01T00:00:00Z"})
    ).json()
    assert later["items"] == []
    bad = await client.get("/api/v1/payments", params={"cursor": "garbage!"})
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["field"] == "query.cursor"
