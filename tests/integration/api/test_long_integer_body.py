"""An integer literal longer than Python's int-conversion limit (4,300 digits) in a JSON
body is a 422 naming `body`, like any body that is not JSON, never a 400 `about:blank`
"There was an error parsing the body". So is every other
body that is not a JSON document: malformed, not UTF-8, too deep."""

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
    assert [error["field"] for error in problem["errors"]] == ["body"]
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


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"amount"', "not valid JSON: "),
        (
            '{"amount": "1.00", "currency": "USD", "description": "é"}'.encode("latin-1"),
            "not valid JSON: not UTF-8 (byte 54: invalid continuation byte)",
        ),
        (
            '{"amount": "1.00", "currency": "USD"}'.encode("utf-16"),
            "not valid JSON: not UTF-8 (byte 0: invalid start byte)",
        ),
        (b"\xff{}", "not valid JSON: not UTF-8 (byte 0: invalid start byte)"),
        (b"[" * 5000 + b"]" * 5000, "not valid JSON: nested deeper than"),
        (
            b'{"amount": "1.00", "amount": "2.00", "currency": "USD"}',
            "not valid JSON: duplicate key",
        ),
    ],
    ids=["malformed", "latin-1", "utf-16", "stray-byte", "too-deep", "key-twice"],
)
async def test_every_body_that_is_not_a_json_document_is_a_422_naming_body(
    client: httpx.AsyncClient, body: bytes, reason: str
) -> None:
    response = await client.post(
        "/api/v1/payments",
        content=body,
        headers={"Idempotency-Key": "not-json", "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["type"] == "https://payflow.dev/problems/validation"
    [error] = problem["errors"]
    assert error["field"] == "body"
    assert error["message"].startswith(reason), error["message"]
    assert (await client.get("/api/v1/payments")).json()["items"] == []
