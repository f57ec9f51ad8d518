"""An integer literal longer than Python's int-conversion limit (4,300 digits) in a JSON
body is a 422 naming `body` (`body.0`), like any body that is not JSON, never a 400 `about:blank`
"There was an error parsing the body" (found by a new user's probing)."""

from __future__ import annotations

import httpx
import pytest

from .conftest import signed

LONG = b"7" * 5000


@pytest.mark.parametrize(
    "body",
    [
        b'{"amount": "1.00", "currency": "USD", "metadata": {"n": ' + LONG + b"}}",
        b'{"amount": "1.00", "currency": "USD", "description": ' + LONG + b"}",
        b"[" + LONG + b"]",
    ],
)
async def test_a_too_long_integer_is_a_field_named_422(
    client: httpx.AsyncClient, body: bytes
) -> None:
    response = await client.post(
        "/api/v1/payments",
        content=body,
        headers={"Idempotency-Key": "long-int", "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"] == "https://payflow.dev/problems/validation"
    # FastAPI names a body that is not JSON `body.<position>`, like malformed JSON.
    assert [error["field"].split(".")[0] for error in problem["errors"]] == ["body"]
    assert (await client.get("/api/v1/payments")).json()["items"] == []


async def test_accounts_and_provider_answer_alike(
    client: httpx.AsyncClient, anon: httpx.AsyncClient
) -> None:
    response = await client.post(
        "/api/v1/accounts",
        content=b'{"asset": ' + LONG + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    body = b'{"event_id": ' + LONG + b"}"
    provider = await anon.post("/api/v1/webhooks/provider", content=body, headers=signed(body))
    assert provider.status_code == 202, provider.text  # kept for review, as before
