"""HTTP trace context: `traceparent` in and out, `X-Request-ID` kept apart, bad headers
ignored (never a 4xx/5xx), and the trace id stored on the rows the request writes."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE}-00f067aa0ba902b7-01"
RESPONSE = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
BODY: dict[str, Any] = {
    "amount": "10.00",
    "currency": "RUB",
    "description": "traced payment",
    "metadata": {},
    "webhook_url": "http://127.0.0.1:9/hook",
}


def _response_trace(response: httpx.Response) -> tuple[str, str, str]:
    match = RESPONSE.fullmatch(response.headers["traceparent"])
    assert match is not None, response.headers["traceparent"]
    trace, span, flags = match.groups()
    return trace, span, flags


async def _create(client: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    headers = {"Idempotency-Key": f"order-{uuid.uuid4().hex}", **headers}
    return await client.post("/api/v1/payments", json=BODY, headers=headers)


async def test_payment_takes_the_trace_id_of_a_valid_traceparent(
    app: Any, client: httpx.AsyncClient
) -> None:
    response = await _create(client, {"traceparent": PARENT, "X-Request-ID": "req-42"})
    assert response.status_code == 202, response.text
    trace, span, flags = _response_trace(response)
    assert (trace, flags) == (TRACE, "01")
    assert span != "00f067aa0ba902b7"  # this request's own span, not the caller's
    assert response.headers["x-request-id"] == "req-42"
    async with app.state.api.pool.acquire() as conn:
        payment = await conn.fetchval("SELECT trace_id FROM payments")
        outbox = await conn.fetch("SELECT topic, trace_id FROM outbox")
    assert payment == TRACE
    assert [(row["topic"], row["trace_id"]) for row in outbox] == [("payment.created", TRACE)]


async def test_caller_flags_are_kept(client: httpx.AsyncClient) -> None:
    response = await client.get("/health", headers={"traceparent": PARENT[:-2] + "00"})
    assert response.status_code == 200
    assert _response_trace(response)[0::2] == (TRACE, "00")


@pytest.mark.parametrize(
    "bad",
    [
        f"00-{'0' * 32}-00f067aa0ba902b7-01",
        f"00-{TRACE}-{'0' * 16}-01",
        f"01-{TRACE}-00f067aa0ba902b7-01",
        f"00-{TRACE.upper()}-00f067aa0ba902b7-01",
        "garbage",
        "00-" + "x" * 200,
    ],
)
async def test_invalid_traceparent_is_ignored_and_a_fresh_trace_is_stored(
    app: Any, client: httpx.AsyncClient, bad: str
) -> None:
    response = await _create(client, {"traceparent": bad})
    assert response.status_code == 202, response.text
    trace, _span, flags = _response_trace(response)
    assert trace != TRACE and flags == "01"
    assert response.headers["x-request-id"] == trace  # no request id given: the trace id
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT trace_id FROM payments") == trace
        assert await conn.fetchval("SELECT trace_id FROM outbox") == trace


async def test_two_traceparent_headers_are_ignored(client: httpx.AsyncClient) -> None:
    other = f"00-{'a' * 32}-00f067aa0ba902b7-01"
    response = await client.get(
        "/health", headers=[("traceparent", PARENT), ("traceparent", other)]
    )
    assert response.status_code == 200
    assert _response_trace(response)[0] not in (TRACE, "a" * 32)


@pytest.mark.parametrize("bad", ["has space", "x" * 129, "tab\there"])
async def test_invalid_request_id_is_replaced_by_the_trace_id(
    client: httpx.AsyncClient, bad: str
) -> None:
    response = await client.get("/health", headers={"traceparent": PARENT, "X-Request-ID": bad})
    assert response.status_code == 200
    assert response.headers["x-request-id"] == TRACE


async def test_problem_responses_carry_the_trace_too(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/api/v1/payments",
        content=b"{not json",
        headers={
            "traceparent": PARENT,
            "Idempotency-Key": "k-1",
            "content-type": "application/json",
        },
    )
    assert 400 <= response.status_code < 500
    assert response.headers["content-type"].startswith("application/problem+json")
    assert _response_trace(response)[0] == TRACE
