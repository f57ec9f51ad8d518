"""No driver text in any problem, metadata stored exactly or refused, withdrawal amounts
at the asset's scale and deposit-address ownership checked first."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI, Request

from payflow.api.db import connection
from payflow.api.state import api_state
from payflow.db.tx import transaction
from payflow.retry import RetryPolicy, retrying

# Names a client must never see: tables, constraints, columns, ids, the driver's words.
SECRET_WORDS = (
    "api_idempotency",
    "violates",
    "duplicate",
    "constraint",
    "Key (",
    "invalid input syntax",
    "secret",
)
RECORD = (
    "INSERT INTO api_idempotency (merchant_id, scope, key, request_hash, state) "
    "SELECT m.id, 'test', {key}, {hash}, {state} "
    "FROM merchants m CROSS JOIN generate_series(1, {rows}) WHERE m.name = 'bootstrap'"
)
# Real statements against a table the service writes (the transaction rolls back).
DRIVER_FAILURES = {
    "unique": (RECORD.format(key="'k'", hash="'h'", state="'in_progress'", rows=2), 409),
    "check": (RECORD.format(key="''", hash="'h'", state="'in_progress'", rows=1), 422),
    "check-state": (RECORD.format(key="'k'", hash="'h'", state="'secret'", rows=1), 422),
    "not-null": (RECORD.format(key="'k'", hash="NULL", state="'in_progress'", rows=1), 422),
    "foreign-key": (
        "INSERT INTO api_idempotency (merchant_id, scope, key, request_hash) "
        "VALUES (gen_random_uuid(), 'test', 'k', 'h')",
        422,
    ),
    "data": ("SELECT 'secret-text'::int", 422),
}


def _failing_route(sql: str, *, through_retry: bool) -> Any:
    async def endpoint(request: Request) -> None:
        state = api_state(request)

        async def run() -> None:
            async with connection(state.pool) as conn, transaction(conn, state.settings):
                await conn.execute(sql)

        if through_retry:  # re-raises `classify(exc) from exc`, carrying the driver's text
            await retrying(run, RetryPolicy(max_attempts=1))
        else:
            await run()

    return endpoint


@pytest.mark.parametrize("through_retry", [False, True])
async def test_no_driver_text_reaches_a_client(
    app: FastAPI, client: httpx.AsyncClient, through_retry: bool
) -> None:
    async with app.state.api.pool.acquire() as conn:
        merchant_id = str(await conn.fetchval("SELECT id FROM merchants WHERE name = 'bootstrap'"))
    for name, (sql, status) in DRIVER_FAILURES.items():
        path = f"/test-driver/{name}/{through_retry}"
        app.add_api_route(path, _failing_route(sql, through_retry=through_retry), methods=["POST"])
        response = await client.post(path)
        assert response.status_code == status, (name, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["detail"] in (
            "the request conflicts with data already stored",
            "the request holds a value payflow cannot store",
        ), problem
        for word in (*SECRET_WORDS, merchant_id):
            assert word not in response.text, (name, word, response.text)


def key() -> dict[str, str]:
    return {"Idempotency-Key": uuid.uuid4().hex}


PAYMENT = b'{"amount": "10.00", "currency": "RUB", "metadata": %s}'
REFUSED_METADATA = [
    b'{"n": 1e999}',
    b'{"n": -1e999}',
    b'{"n": 1E+400}',
    b'{"n": NaN}',
    b'{"n": Infinity}',
    b'{"n": -Infinity}',
    b'{"a": [1, {"b": [1e999]}]}',
    b'{"n": 0.10000000000000000001}',
    b'{"n": 1e-400}',
    b'{"n": 3.141592653589793238462643383279}',
    b'{"n": 18446744073709551616}',
    b'{"n": -9223372036854775809}',
    b'{"a": {"b": [123456789012345678901234567890]}}',
    b'{"n": "nul \\u0000 here"}',
    b'{"nul \\u0000 key": 1}',
    b'{"deep": ' + b"[" * 64 + b"1" + b"]" * 64 + b"}",
    b'{"deep": ' + b"[" * 500 + b"1.5" + b"]" * 500 + b"}",
]


@pytest.mark.parametrize("metadata", REFUSED_METADATA, ids=lambda raw: raw.decode()[:40])
async def test_metadata_that_would_change_is_refused(
    app: Any, client: httpx.AsyncClient, metadata: bytes
) -> None:
    response = await client.post(
        "/api/v1/payments",
        content=PAYMENT % metadata,
        headers={**key(), "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    problem = response.json()
    assert [error["field"] for error in problem["errors"]] == ["body.metadata"], problem
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM payments") == 0


async def test_metadata_numbers_that_round_trip_are_stored_exactly(
    client: httpx.AsyncClient,
) -> None:
    metadata = (
        b'{"rate": 1.5, "tenth": 0.1, "hundred": 1e2, "tiny": 5e-324,'
        b' "max": 1.7976931348623157e308, "u64": 18446744073709551615,'
        b' "i64": -9223372036854775808, "zero": -0,'
        b' "nested": [{"x": 2.50}], "flag": true, "none": null}'
    )
    response = await client.post(
        "/api/v1/payments",
        content=PAYMENT % metadata,
        headers={**key(), "Content-Type": "application/json"},
    )
    assert response.status_code == 202, response.text
    stored = (await client.get(f"/api/v1/payments/{response.json()['payment_id']}")).json()
    assert stored["metadata"] == {
        "rate": 1.5,
        "tenth": 0.1,
        "hundred": 100.0,
        "tiny": 5e-324,
        "max": 1.7976931348623157e308,
        "u64": 18446744073709551615,
        "i64": -9223372036854775808,
        # the integer -0; a float -0.0 is refused (test_body_caps_metadata_and_replay.py)
        "zero": 0,
        "nested": [{"x": 2.5}],
        "flag": True,
        "none": None,
    }
    assert orjson.dumps(stored["metadata"]["u64"]) == b"18446744073709551615"


async def _account(client: httpx.AsyncClient, asset: str) -> str:
    response = await client.post("/api/v1/accounts", json={"asset": asset})
    assert response.status_code == 201, response.text
    account_id: str = response.json()["account_id"]
    return account_id


@pytest.mark.parametrize(
    ("asset", "amount", "wire"),
    [
        ("USD", "1", "1.00"),
        ("USD", "1.5", "1.50"),
        ("USDC", "1", "1.000000"),
        ("WBTC", "0.1", "0.10000000"),
        ("ETH", "2", "2.000000000000000000"),
    ],
)
async def test_withdrawal_answers_render_the_asset_scale(
    client: httpx.AsyncClient, asset: str, amount: str, wire: str
) -> None:
    account_id = await _account(client, asset)
    headers = key()
    url = f"/api/v1/accounts/{account_id}/withdrawals"
    first = await client.post(url, json={"amount": amount}, headers=headers)
    replay = await client.post(url, json={"amount": amount}, headers=headers)
    assert first.status_code == replay.status_code == 202
    assert first.json()["amount"] == replay.json()["amount"] == wire
    event = (await client.get(f"/api/v1/events/{first.json()['event_id']}")).json()
    assert event["amount"] == wire


async def test_deposit_address_checks_ownership_before_the_admin_key(
    client: httpx.AsyncClient, other: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    account_id = await _account(client, "USDC")
    body = {"chain": "ETH_MAINNET", "address": "0x" + "34" * 20}
    url = "/api/v1/accounts/{}/deposit-addresses"
    foreign = await other.post(url.format(account_id), json=body)
    unknown_id = str(uuid.uuid4())
    unknown = await other.post(url.format(unknown_id), json=body)
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json()["detail"].replace(account_id, "?") == unknown.json()["detail"].replace(
        unknown_id, "?"
    )
    own = await client.post(url.format(account_id), json=body)
    assert own.status_code == 403
    assert own.json()["type"].endswith("forbidden")
    assigned = await admin.post(url.format(account_id), json=body)
    assert assigned.status_code == 201
    assert assigned.json() == {
        "chain": "ETH_MAINNET",
        "address": body["address"],
        "account_id": account_id,
    }
