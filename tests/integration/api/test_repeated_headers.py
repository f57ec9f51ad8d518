"""A header that names one thing, sent twice, is refused, never judged by its first copy.

`Idempotency-Key: A` + `Idempotency-Key: B` must create no payment under A (a later
retry with B alone would create a second payment), `X-API-Key: <admin>` + `X-API-Key:
<merchant>` must not authenticate as the admin, and two signature headers must not be
judged by the first one.
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from .conftest import ADMIN_KEY, API_KEY, signed

PAYMENT = {"amount": "10.00", "currency": "USD"}


def _twice(name: str, first: str, second: str, **more: str) -> list[tuple[str, str]]:
    return [(name, first), (name, second), *more.items()]


async def _field_error(response: httpx.Response) -> None:
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert errors == [{"field": "header.Idempotency-Key", "message": "must be sent once"}]


async def test_two_idempotency_keys_create_no_payment(client: httpx.AsyncClient) -> None:
    for second in ("key-b", "key-a"):
        response = await client.post(
            "/api/v1/payments", json=PAYMENT, headers=_twice("Idempotency-Key", "key-a", second)
        )
        await _field_error(response)
    listed = await client.get("/api/v1/payments")
    assert listed.json()["items"] == []
    # One key still works, and it is the key the payment is stored under.
    one = await client.post("/api/v1/payments", json=PAYMENT, headers={"Idempotency-Key": "key-b"})
    assert one.status_code == 202, one.text


async def test_two_idempotency_keys_on_withdrawals_and_addresses(
    client: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    account = (await client.post("/api/v1/accounts", json={"asset": "ETH"})).json()["account_id"]
    withdrawal = await client.post(
        f"/api/v1/accounts/{account}/withdrawals",
        json={"amount": "1"},
        headers=_twice("Idempotency-Key", "w-a", "w-b"),
    )
    await _field_error(withdrawal)
    address = await admin.post(
        f"/api/v1/accounts/{account}/deposit-addresses",
        json={"chain": "ETH_MAINNET", "address": "0x" + "ab" * 20},
        headers=_twice("Idempotency-Key", "d-a", "d-b"),
    )
    await _field_error(address)


@pytest.mark.parametrize(
    ("first", "second"), [(ADMIN_KEY, API_KEY), (API_KEY, ADMIN_KEY), (API_KEY, API_KEY)]
)
async def test_two_api_keys_are_401(anon: httpx.AsyncClient, first: str, second: str) -> None:
    for path in ("/health", "/api/v1/admin/dlq"):
        response = await anon.get(path, headers=_twice("X-API-Key", first, second))
        assert response.status_code == 401, (path, response.text)
        assert response.json()["detail"] == "X-API-Key must be sent once"
        assert response.headers["WWW-Authenticate"] == "X-API-Key"


async def test_two_provider_signatures_are_401(anon: httpx.AsyncClient) -> None:
    body = json.dumps({"event_id": f"e-{uuid.uuid4().hex}", "event_type": "deposit"}).encode()
    good = signed(body)["X-Alchemy-Signature"]
    for second in (good, "0" * 64):
        response = await anon.post(
            "/api/v1/webhooks/provider",
            content=body,
            headers=_twice(
                "X-Alchemy-Signature", good, second, **{"Content-Type": "application/json"}
            ),
        )
        assert response.status_code == 401, response.text
    once = await anon.post("/api/v1/webhooks/provider", content=body, headers=signed(body))
    assert once.status_code == 202, once.text
