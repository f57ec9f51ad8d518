"""A JSON body that names one key twice is refused with a 422 problem, on every JSON
operation and on the provider webhook, whichever decoder the body takes: decoders
disagree on which value counts, so payflow never picks one. Nothing is written."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from .conftest import signed
from .test_deep_json import PROVIDER, _alive, send_to_every_json_operation

# The second body holds a lone surrogate escape, which sends it past orjson to the
# standard decoder; the first stays on orjson's path.
PAYMENT_BODIES = {
    "orjson": b'{"amount": "1.00", "currency": "USD", "amount": "1000.00"}',
    "stdlib": b'{"amount": "1.00", "currency": "USD", "description": "\\ud800",'
    b' "amount": "1000.00"}',
}


async def _count(app: Any, sql: str) -> int:
    async with app.state.api.pool.acquire() as conn:
        value: int = await conn.fetchval(sql)
    return value


@pytest.mark.parametrize("path", list(PAYMENT_BODIES))
async def test_a_payment_with_a_key_twice_is_refused_and_not_written(
    app: Any, client: httpx.AsyncClient, path: str
) -> None:
    response = await client.post(
        "/api/v1/payments",
        content=PAYMENT_BODIES[path],
        headers={"Idempotency-Key": f"dup-{path}", "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "duplicate key 'amount'" in response.text
    assert await _count(app, "SELECT count(*) FROM payments") == 0
    assert await _count(app, "SELECT count(*) FROM api_idempotency") == 0
    assert await _count(app, "SELECT count(*) FROM outbox") == 0


@pytest.mark.parametrize(
    "body",
    [
        b'{"metadata": {"order": "1", "order": "2"}}',  # nested
        b'{"items": [{"a": 1, "a": 2}]}',  # inside an array
        b'{"a": 1, "\\u0061": 2}',  # the same key, one escaped
    ],
    ids=["nested", "in-array", "escaped"],
)
def test_every_json_operation_refuses_a_key_twice(live_api: str, body: bytes) -> None:
    for method, path, response in send_to_every_json_operation(live_api, body, "dup-keys"):
        assert response.status_code == 422, (method, path, response.text[:300])
        assert response.headers["content-type"].startswith("application/problem+json")
    _alive(live_api)


def test_the_provider_webhook_refuses_a_key_twice(live_api: str) -> None:
    for body in (
        b'{"event_id": "dup-1", "amount": "1", "amount": "100"}',
        b'{"event_id": "dup-2", "note": "\\ud800", "event_id": "dup-3"}',
    ):
        response = httpx.post(f"{live_api}{PROVIDER}", content=body, headers=signed(body))
        assert response.status_code == 422, response.text[:300]
        assert response.json()["detail"] == "body: is not valid JSON"
    # The same keys once each: accepted (kept for review as an unmatched delivery).
    body = b'{"event_id": "dup-ok", "amount": "1", "note": "a:b"}'
    response = httpx.post(f"{live_api}{PROVIDER}", content=body, headers=signed(body))
    assert response.status_code == 202, response.text[:300]
