"""A body sent without Content-Length (chunked) that goes past the cap is the same 413
problem as one refused by its Content-Length (docs/api.md: "by Content-Length or while
streaming"): a chunked 70 KB payment must answer 413, not the 400 about:blank
"There was an error parsing the body" that FastAPI makes of any exception raised while
it reads a JSON body."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from payflow.app import create_app
from payflow.config import Settings

from .conftest import API_KEY, signed

CAP = 1024


async def _chunks(total: int) -> AsyncIterator[bytes]:
    yield b'{"amount": "1.00", "currency": "USD", "description": "'
    sent = 0
    while sent < total:
        yield b"a" * 256
        sent += 256
    yield b'"}'


@pytest.fixture
async def capped(api_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    settings = api_settings.model_copy(
        update={"max_body_bytes": CAP, "provider_max_body_bytes": 2 * CAP}
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://payflow.test", headers={"X-API-Key": API_KEY}
        ) as client:
            yield client


def _is_413(response: httpx.Response, limit: int) -> None:
    assert response.status_code == 413, response.text
    assert response.json() == {
        "type": "https://payflow.dev/problems/too-large",
        "title": "Payload too large",
        "status": 413,
        "detail": f"request bodies are limited to {limit} bytes",
    }


async def test_a_streamed_json_body_over_the_cap_is_413(capped: httpx.AsyncClient) -> None:
    account = await capped.post("/api/v1/accounts", json={"asset": "USD"})
    assert account.status_code == 201, account.text
    for path in (
        "/api/v1/payments",
        "/api/v1/accounts",
        f"/api/v1/accounts/{account.json()['account_id']}/withdrawals",
    ):
        response = await capped.post(
            path,
            content=_chunks(4 * CAP),
            headers={"Idempotency-Key": "streamed", "Content-Type": "application/json"},
        )
        assert "content-length" not in response.request.headers
        _is_413(response, CAP)
    assert (await capped.get("/api/v1/payments")).json()["items"] == []


async def test_a_streamed_body_under_the_cap_still_works(capped: httpx.AsyncClient) -> None:
    response = await capped.post(
        "/api/v1/payments",
        content=_chunks(256),
        headers={"Idempotency-Key": "small", "Content-Type": "application/json"},
    )
    assert response.status_code == 202, response.text


async def test_the_provider_webhook_keeps_its_own_cap(capped: httpx.AsyncClient) -> None:
    body = b'{"event_id": "' + b"a" * (3 * CAP) + b'"}'

    async def stream() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 256):
            yield body[start : start + 256]

    response = await capped.post(
        "/api/v1/webhooks/provider", content=stream(), headers=signed(body)
    )
    _is_413(response, 2 * CAP)
