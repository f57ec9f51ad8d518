"""POST /api/v1/webhooks/provider: HMAC over the raw body, both payload formats,
address mapping, unmatched events, duplicates and the outbox contract.

Registry, namespace and standing-alone cases live in `test_ingress_registry.py`."""

from __future__ import annotations

import hashlib
import hmac
from decimal import Decimal
from typing import Any

import httpx
import orjson
import pytest

from tests.integration.api.conftest import PROVIDER_SECRET, signed

from .alchemy import USDC_CONTRACT, eth_activity, token_activity, webhook

URL = "/api/v1/webhooks/provider"
ADDRESS = "0x" + "ab" * 20


@pytest.fixture
async def usdc_account(client: httpx.AsyncClient, admin: httpx.AsyncClient) -> str:
    account = (await client.post("/api/v1/accounts", json={"asset": "USDC"})).json()
    response = await admin.post(
        f"/api/v1/accounts/{account['account_id']}/deposit-addresses",
        json={"chain": "ETH_MAINNET", "address": ADDRESS.upper().replace("0X", "0x")},
    )
    assert response.status_code == 201, response.text
    assert response.json()["address"] == ADDRESS
    account_id: str = account["account_id"]
    return account_id


def generic(**overrides: Any) -> bytes:
    body = {
        "event_id": "evt-1",
        "event_type": "deposit",
        "to_address": ADDRESS,
        "asset": "USDC",
        "amount": "12.5",
        "tx_hash": "0x" + "cd" * 32,
        "contract_address": USDC_CONTRACT,
    }
    body.update(overrides)
    return orjson.dumps(body)


async def rows(app: Any, sql: str) -> list[Any]:
    async with app.state.api.pool.acquire() as conn:
        return list(await conn.fetch(sql))


async def test_generic_event_lands_pending_with_outbox_row(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    body = generic()
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    parent = f"00-{trace}-00f067aa0ba902b7-01"
    response = await anon.post(URL, content=body, headers={**signed(body), "traceparent": parent})
    assert response.status_code == 202, response.text
    assert response.json() == {
        "status": "accepted",
        "trace_id": trace,
        "events": [{"event_id": "gen:evt-1", "result": "recorded"}],
    }
    # A provider's word is a report for the node to verify, never a credit.
    reports = await rows(
        app,
        "SELECT provider_event_id, account_id, amount, status, trace_id, source"
        " FROM chain_deposit_reports",
    )
    assert [
        (r["provider_event_id"], str(r["account_id"]), r["amount"], r["status"], r["trace_id"])
        for r in reports
    ] == [("gen:evt-1", usdc_account, Decimal("12.5"), "pending", trace)]
    assert reports[0]["source"] == "webhook"
    assert await rows(app, "SELECT 1 FROM payment_events") == []
    assert await rows(app, "SELECT topic, payload FROM outbox") == []


async def test_duplicate_delivery_writes_nothing_new(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    body = generic()
    first = await anon.post(URL, content=body, headers=signed(body))
    second = await anon.post(URL, content=body, headers=signed(body))
    assert first.status_code == second.status_code == 202
    assert second.json()["events"] == [{"event_id": "gen:evt-1", "result": "duplicate"}]
    assert len(await rows(app, "SELECT 1 FROM chain_deposit_reports")) == 1
    assert len(await rows(app, "SELECT 1 FROM payment_events")) == 0


async def test_trace_id_is_generated_when_absent(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    body = generic()
    response = await anon.post(URL, content=body, headers=signed(body))
    trace = response.json()["trace_id"]
    assert trace and response.headers["x-request-id"] == trace
    stored = await rows(app, "SELECT trace_id FROM chain_deposit_reports")
    assert stored[0]["trace_id"] == trace


@pytest.mark.parametrize(
    "make_headers",
    [
        pytest.param(
            lambda b: {"X-Alchemy-Signature": hmac.new(b"x" * 32, b, hashlib.sha256).hexdigest()},
            id="wrong-key",
        ),
        pytest.param(
            lambda b: {"X-Alchemy-Signature": signed(b + b" ")["X-Alchemy-Signature"]},
            id="tampered-body",
        ),
        pytest.param(lambda b: {}, id="missing-header"),
        pytest.param(lambda b: {"X-Alchemy-Signature": "zz" * 32}, id="non-hex"),
        pytest.param(
            lambda b: {"X-Alchemy-Signature": signed(b)["X-Alchemy-Signature"][:-2]}, id="truncated"
        ),
        pytest.param(
            lambda b: {"X-Alchemy-Signature": "sha256=" + signed(b)["X-Alchemy-Signature"]},
            id="prefixed",
        ),
        pytest.param(lambda b: {"X-Alchemy-Signature": "é" * 64}, id="non-ascii"),
    ],
)
async def test_bad_signatures_are_401_and_write_nothing(
    app: Any, anon: httpx.AsyncClient, usdc_account: str, make_headers: Any
) -> None:
    body = generic()
    headers = {k: v.encode("utf-8") for k, v in make_headers(body).items()}
    response = await anon.post(URL, content=body, headers=headers)
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert await rows(app, "SELECT 1 FROM payment_events") == []


async def test_signature_is_over_raw_bytes_not_reparsed_json(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    body = (
        b'{ "event_id":"evt-raw", "event_type":"deposit", "to_address":"'
        + ADDRESS.encode()
        + (b'", "asset":"USDC", "amount":"1", "tx_hash":"0x' + b"ef" * 32 + b'",')
        + (b' "contract_address": "' + USDC_CONTRACT.encode() + b'" }')
    )
    response = await anon.post(URL, content=body, headers=signed(body))
    assert response.status_code == 202


async def test_unknown_address_is_kept_unmatched_and_answered_202(
    app: Any, anon: httpx.AsyncClient
) -> None:
    body = generic(event_id="evt-lost", to_address="0x" + "99" * 20)
    for _ in range(2):
        response = await anon.post(URL, content=body, headers=signed(body))
        assert response.status_code == 202
        assert response.json()["events"] == [
            {"event_id": "gen:evt-lost", "result": "unmatched", "reason": "unknown_address"}
        ]
    unmatched = await rows(app, "SELECT event_id, reason, address FROM unmatched_provider_events")
    assert [(u["event_id"], u["reason"], u["address"]) for u in unmatched] == [
        ("gen:evt-lost", "unknown_address", "0x" + "99" * 20)
    ]
    assert await rows(app, "SELECT 1 FROM payment_events") == []
    assert await rows(app, "SELECT 1 FROM outbox") == []


async def test_asset_mismatch_is_unmatched(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    dai = "0x6b175474e89094c44da98b954eedeac495271d0f"
    body = generic(event_id="evt-dai", asset="DAI", contract_address=dai)
    response = await anon.post(URL, content=body, headers=signed(body))
    assert response.json()["events"][0]["result"] == "unmatched"
    assert (await rows(app, "SELECT reason FROM unmatched_provider_events"))[0][
        "reason"
    ] == "asset_mismatch"


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"amount": 12.5}, id="json-number-amount"),
        pytest.param({"amount": "1.0000001"}, id="finer-than-the-token"),
        pytest.param({"amount": "-1"}, id="negative"),
        pytest.param({"amount": "1e30"}, id="too-large"),
        pytest.param({"event_type": "withdrawal"}, id="event-type"),
        pytest.param({"to_address": "not-an-address!"}, id="address"),
        pytest.param({"event_id": ""}, id="empty-id"),
        pytest.param({"event_id": None}, id="null-id"),
        pytest.param({"tx_hash": 5}, id="tx-hash"),
        pytest.param({"chain": "eth"}, id="chain"),
        pytest.param({"asset": "usdc\u0000"}, id="nul-asset"),
    ],
)
async def test_invalid_generic_payloads_are_kept_for_review_not_refused(
    app: Any, anon: httpx.AsyncClient, usdc_account: str, overrides: dict[str, Any]
) -> None:
    body = generic(**overrides)
    for _ in range(2):  # a redelivery maps onto the same unmatched row
        response = await anon.post(URL, content=body, headers=signed(body))
        assert response.status_code == 202, response.text
        [event] = response.json()["events"]
        assert (event["result"], event["reason"]) == ("unmatched", "invalid")
    unmatched = await rows(app, "SELECT event_id, reason, detail FROM unmatched_provider_events")
    assert [(u["event_id"], u["reason"]) for u in unmatched] == [(event["event_id"], "invalid")]
    assert unmatched[0]["detail"]
    assert await rows(app, "SELECT 1 FROM payment_events") == []
    assert await rows(app, "SELECT 1 FROM outbox") == []
    [kept] = await rows(app, "SELECT body FROM provider_deliveries")
    assert kept["body"] == body


async def test_zero_generic_amount_is_kept_as_zero_value(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    body = generic(amount="0.00")
    response = await anon.post(URL, content=body, headers=signed(body))
    assert response.json()["events"][0]["reason"] == "zero_value"
    assert await rows(app, "SELECT 1 FROM payment_events") == []


@pytest.mark.parametrize("body", [b"not json", b'{"a": NaN}', b"\xff{}", b'{"event_id": "x"'])
async def test_signed_bytes_that_are_not_json_are_422(
    app: Any, anon: httpx.AsyncClient, body: bytes
) -> None:
    response = await anon.post(URL, content=body, headers=signed(body))
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["errors"][0]["field"] == "body"
    assert await rows(app, "SELECT 1 FROM unmatched_provider_events") == []


async def test_alchemy_address_activity_becomes_one_event_per_activity(
    app: Any,
    anon: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    client: httpx.AsyncClient,
    usdc_account: str,
) -> None:
    eth = (await client.post("/api/v1/accounts", json={"asset": "ETH"})).json()
    eth_address = "0x" + "ee" * 20
    await admin.post(
        f"/api/v1/accounts/{eth['account_id']}/deposit-addresses",
        json={"chain": "ETH_MAINNET", "address": eth_address},
    )
    wei = 1_234_567_890_123_456_789_012  # more digits than a float can hold
    payload = webhook(
        token_activity(ADDRESS, 293_092_129, log_index=0x6E),
        token_activity(ADDRESS, 5, log_index=0x6F, removed=True),
        eth_activity(eth_address, wei),
        token_activity("0x" + "77" * 20, 1_000_000, log_index=0x70),
    )
    body = orjson.dumps(payload)
    response = await anon.post(URL, content=body, headers=signed(body))
    assert response.status_code == 202, response.text
    tx = "0x" + "7a" * 32
    assert response.json()["events"] == [
        {"event_id": f"alchemy:{tx}:110", "result": "recorded"},
        {"event_id": f"alchemy:{tx}:111", "result": "unmatched", "reason": "removed"},
        {"event_id": "alchemy:0x" + "5b" * 32 + ":external", "result": "recorded"},
        {"event_id": f"alchemy:{tx}:112", "result": "unmatched", "reason": "unknown_address"},
    ]
    events = {
        e["provider_event_id"]: (e["amount"], e["position"], e["log_index"])
        for e in await rows(
            app, "SELECT provider_event_id, amount, position, log_index FROM chain_deposit_reports"
        )
    }
    assert events == {  # the token's position inside the transaction is the node's to find
        f"alchemy:{tx}:110": (Decimal("293.092129"), None, 0x6E),
        "alchemy:0x" + "5b" * 32 + ":external": (Decimal("1234.567890123456789012"), -1, None),
    }
    assert len(await rows(app, "SELECT 1 FROM outbox")) == 0
    again = await anon.post(URL, content=body, headers=signed(body))
    assert [e["result"] for e in again.json()["events"]] == [
        "duplicate",
        "unmatched",
        "duplicate",
        "unmatched",
    ]
    assert len(await rows(app, "SELECT 1 FROM chain_deposit_reports")) == 2


async def test_secret_is_not_the_api_key(anon: httpx.AsyncClient, usdc_account: str) -> None:
    body = generic()
    response = await anon.post(
        URL,
        content=body,
        headers={"X-API-Key": "test-api-key-0123456789", "Content-Type": "application/json"},
    )
    assert response.status_code == 401
    assert PROVIDER_SECRET not in response.text


async def test_admin_lists_unmatched_events_with_a_cursor(
    anon: httpx.AsyncClient, admin: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    for index in range(3):
        body = generic(event_id=f"lost-{index}", to_address="0x" + f"{index}" * 40)
        await anon.post(URL, content=body, headers=signed(body))
    assert (await client.get("/api/v1/admin/unmatched-events")).status_code == 403
    first = (await admin.get("/api/v1/admin/unmatched-events", params={"limit": 2})).json()
    second = (
        await admin.get(
            "/api/v1/admin/unmatched-events", params={"limit": 2, "cursor": first["next_cursor"]}
        )
    ).json()
    ids = [item["event_id"] for item in first["items"] + second["items"]]
    assert sorted(ids) == ["gen:lost-0", "gen:lost-1", "gen:lost-2"] and len(set(ids)) == 3
    assert second["next_cursor"] is None
    assert first["items"][0]["reason"] == "unknown_address"
    assert first["items"][0]["detail"] == "no account has this deposit address"
    assert first["items"][0]["position"] == 0
