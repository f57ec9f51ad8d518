"""A payment body whose values PostgreSQL cannot store faithfully is a clear 422
(`1e999` in metadata is never stored as null; NUL characters never reach the driver)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

URL = "/api/v1/payments"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param(b'{"metadata": {"x": 1e999}}', "body.metadata", id="1e999"),
        pytest.param(b'{"metadata": {"x": [1, -1e400]}}', "body.metadata", id="nested-neg-inf"),
        pytest.param(b'{"metadata": {"x": NaN}}', "body.metadata", id="nan-literal"),
        pytest.param(b'{"metadata": {"x": "a\\u0000b"}}', "body.metadata", id="nul-value"),
        pytest.param(b'{"metadata": {"a\\u0000": 1}}', "body.metadata", id="nul-key"),
        pytest.param(b'{"description": "a\\u0000b"}', "body.description", id="nul-description"),
    ],
)
async def test_unstorable_values_are_422_and_store_nothing(
    app: Any, client: httpx.AsyncClient, body: bytes, field: str
) -> None:
    content = b'{"amount": "10.00", "currency": "RUB", ' + body[1:]
    response = await client.post(
        URL,
        content=content,
        headers={"Idempotency-Key": uuid.uuid4().hex, "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert [e["field"] for e in response.json()["errors"]] == [field]
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM payments") == 0


async def test_finite_metadata_is_stored_as_sent(app: Any, client: httpx.AsyncClient) -> None:
    content = b'{"amount": "10.00", "currency": "RUB", "metadata": {"x": 1e300, "y": "\\u00e9"}}'
    response = await client.post(
        URL,
        content=content,
        headers={"Idempotency-Key": uuid.uuid4().hex, "Content-Type": "application/json"},
    )
    assert response.status_code == 202, response.text
    async with app.state.api.pool.acquire() as conn:
        stored = await conn.fetchval("SELECT metadata FROM payments")
    assert stored == {"x": 1e300, "y": "é"}
