"""Provider ingress against the token registry, the provider id namespaces and
deliveries whose activities stand alone (issue 7, items 1, 2 and 7), on the real
PostgreSQL; balances are checked after `post_event`, the path the ledger worker runs."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import orjson
import pytest

from payflow.db.tx import transaction
from payflow.ledger.posting import post_event
from payflow.payments.processor import SUCCEEDED, finalize, load_payment

from .alchemy import (
    USDC_CONTRACT,
    eth_activity,
    internal_activity,
    nft_activity,
    token_activity,
    webhook,
)
from .conftest import signed

URL = "/api/v1/webhooks/provider"
USDC_ADDRESS = "0x" + "ab" * 20
ETH_ADDRESS = "0x" + "ee" * 20
DAI_CONTRACT = "0x6b175474e89094c44da98b954eedeac495271d0f"
USDT_CONTRACT = "0xdac17f958d2ee523a2206206994597c13d831ec7"
FOREIGN_CONTRACT = "0x" + "11" * 20


async def _account(
    client: httpx.AsyncClient, admin: httpx.AsyncClient, asset: str, address: str
) -> str:
    account = (await client.post("/api/v1/accounts", json={"asset": asset})).json()
    response = await admin.post(
        f"/api/v1/accounts/{account['account_id']}/deposit-addresses",
        json={"chain": "ETH_MAINNET", "address": address},
    )
    assert response.status_code == 201, response.text
    account_id: str = account["account_id"]
    return account_id


@pytest.fixture
async def usdc_account(client: httpx.AsyncClient, admin: httpx.AsyncClient) -> str:
    return await _account(client, admin, "USDC", USDC_ADDRESS)


@pytest.fixture
async def eth_account(client: httpx.AsyncClient, admin: httpx.AsyncClient) -> str:
    return await _account(client, admin, "ETH", ETH_ADDRESS)


async def deliver(anon: httpx.AsyncClient, payload: object) -> list[dict[str, str]]:
    body = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    response = await anon.post(URL, content=body, headers=signed(body))
    assert response.status_code == 202, response.text
    events: list[dict[str, str]] = response.json()["events"]
    return events


async def rows(app: Any, sql: str, *args: Any) -> list[Any]:
    async with app.state.api.pool.acquire() as conn:
        return list(await conn.fetch(sql, *args))


async def post_all(app: Any) -> None:
    """Post every pending event, as the ledger worker would."""
    for row in await rows(app, "SELECT event_id FROM payment_events WHERE status = 'pending'"):
        await post_event(app.state.api.pool, app.state.api.settings, row["event_id"])


async def balance(app: Any, account_id: str) -> Decimal:
    [row] = await rows(app, "SELECT balance FROM accounts WHERE id = $1::uuid", account_id)
    value: Decimal = row["balance"]
    return value


def generic(**fields: Any) -> dict[str, Any]:
    return {
        "event_id": "evt-1",
        "event_type": "deposit",
        "to_address": USDC_ADDRESS,
        "asset": "USDC",
        "amount": "12.5",
        "tx_hash": "0x" + "cd" * 32,
        "contract_address": USDC_CONTRACT,
        **fields,
    }


# --- item 1: which asset and how much come from the registry, never from the payload


async def test_usdc_symbol_from_a_foreign_contract_credits_nothing(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    forged = token_activity(USDC_ADDRESS, 1_000 * 10**6, contract=FOREIGN_CONTRACT)
    [event] = await deliver(anon, webhook(forged))
    assert (event["result"], event["reason"]) == ("unmatched", "unknown_token")
    await post_all(app)
    assert await balance(app, usdc_account) == 0
    assert await rows(app, "SELECT 1 FROM payment_events") == []
    assert await rows(app, "SELECT 1 FROM outbox") == []
    [kept] = await rows(app, "SELECT reason, asset, detail FROM unmatched_provider_events")
    assert kept["reason"] == "unknown_token" and FOREIGN_CONTRACT in kept["detail"]


@pytest.mark.parametrize(
    "activity",
    [
        pytest.param(token_activity(USDC_ADDRESS, 10**6, asset="USDT"), id="symbol-disagrees"),
        pytest.param(token_activity(USDC_ADDRESS, 10**6, decimals=2), id="decimals-disagree"),
        pytest.param(token_activity(USDC_ADDRESS, 10**6, asset="USDC\x00"), id="symbol-with-nul"),
        pytest.param(
            {
                **token_activity(USDC_ADDRESS, 10**6),
                "rawContract": {"rawValue": "0xf4240", "address": USDC_CONTRACT, "decimals": "six"},
            },
            id="decimals-not-a-number",
        ),
        pytest.param(
            {**eth_activity(ETH_ADDRESS, 10**18), "asset": "WETH"}, id="native-symbol-disagrees"
        ),
        pytest.param(
            {
                **eth_activity(ETH_ADDRESS, 10**18),
                "rawContract": {"rawValue": "0x1", "address": FOREIGN_CONTRACT, "decimals": 18},
            },
            id="native-with-a-contract",
        ),
    ],
)
async def test_claims_that_disagree_with_the_registry_are_unknown_token(
    app: Any, anon: httpx.AsyncClient, usdc_account: str, eth_account: str, activity: Any
) -> None:
    [event] = await deliver(anon, webhook(activity))
    assert (event["result"], event["reason"]) == ("unmatched", "unknown_token")
    assert await rows(app, "SELECT 1 FROM payment_events") == []


async def test_decimals_come_from_the_registry(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    no_decimals = token_activity(USDC_ADDRESS, 2_500_000, decimals=None, log_index=1)
    hex_decimals = token_activity(USDC_ADDRESS, 1, log_index=2)
    hex_decimals["rawContract"]["decimals"] = "0x6"
    no_symbol = token_activity(USDC_ADDRESS, 3, asset=None, log_index=3)
    events = await deliver(anon, webhook(no_decimals, hex_decimals, no_symbol))
    assert [e["result"] for e in events] == ["recorded"] * 3
    await post_all(app)
    assert await balance(app, usdc_account) == Decimal("2.500004")


async def test_the_asset_of_the_address_must_be_the_registry_asset(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    usdt = token_activity(USDC_ADDRESS, 10**6, asset="USDT", contract=USDT_CONTRACT)
    [event] = await deliver(anon, webhook(usdt))
    assert event["reason"] == "asset_mismatch"
    assert await rows(app, "SELECT 1 FROM payment_events") == []


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        pytest.param({"contract_address": None}, "unknown_token", id="token-without-contract"),
        pytest.param({"contract_address": FOREIGN_CONTRACT}, "unknown_token", id="unknown"),
        pytest.param({"contract_address": DAI_CONTRACT}, "unknown_token", id="asset-disagrees"),
        pytest.param({"contract_address": "0x12"}, "unknown_token", id="not-an-address"),
        pytest.param({"asset": "ETH"}, "unknown_token", id="native-asset-with-contract"),
        pytest.param(
            {"chain": "POLYGON", "asset": "ETH", "contract_address": None},
            "unknown_chain",
            id="unregistered-chain",
        ),
    ],
)
async def test_generic_events_are_checked_against_the_registry(
    app: Any, anon: httpx.AsyncClient, usdc_account: str, fields: dict[str, Any], reason: str
) -> None:
    [event] = await deliver(anon, generic(**fields))
    assert (event["result"], event["reason"]) == ("unmatched", reason)
    assert await rows(app, "SELECT 1 FROM payment_events") == []


async def test_generic_native_and_token_events_credit_registered_assets(
    app: Any, anon: httpx.AsyncClient, usdc_account: str, eth_account: str
) -> None:
    eth = generic(
        event_id="eth-1", to_address=ETH_ADDRESS, asset="ETH", amount="1.5", contract_address=None
    )
    del eth["contract_address"]
    assert (await deliver(anon, eth))[0]["result"] == "recorded"
    contract_upper = USDC_CONTRACT.upper().replace("0X", "0x")
    assert (await deliver(anon, generic(contract_address=contract_upper)))[0][
        "result"
    ] == "recorded"
    await post_all(app)
    assert await balance(app, eth_account) == Decimal("1.5")
    assert await balance(app, usdc_account) == Decimal("12.5")


# --- item 2: provider ids live in their own namespace


async def test_provider_id_equal_to_a_payment_credit_id_never_takes_its_place(
    app: Any, anon: httpx.AsyncClient, client: httpx.AsyncClient, usdc_account: str
) -> None:
    created = await client.post(
        "/api/v1/payments",
        json={"amount": "10.00", "currency": "RUB", "description": "order"},
        headers={"Idempotency-Key": "order-namespace-1"},
    )
    assert created.status_code == 202, created.text
    payment_id = created.json()["payment_id"]
    [event] = await deliver(anon, generic(event_id=f"payment:{payment_id}", amount="12.5"))
    assert event == {"event_id": f"gen:payment:{payment_id}", "result": "recorded"}

    pool, settings = app.state.api.pool, app.state.api.settings
    async with pool.acquire() as conn, transaction(conn, settings):
        payment = await load_payment(conn, payment_id)
        assert await finalize(conn, payment, SUCCEEDED, "trace-namespace")
    await post_all(app)

    stored = {
        r["event_id"]: (str(r["account_id"]), r["amount"], r["status"])
        for r in await rows(app, "SELECT event_id, account_id, amount, status FROM payment_events")
    }
    [settlement] = await rows(
        app, "SELECT id, balance FROM accounts WHERE settlement AND asset = 'RUB'"
    )
    assert stored == {
        f"gen:payment:{payment_id}": (usdc_account, Decimal("12.5"), "confirmed"),
        f"payment:{payment_id}": (str(settlement["id"]), Decimal("10.00"), "confirmed"),
    }
    assert settlement["balance"] == Decimal("10.00")
    assert await balance(app, usdc_account) == Decimal("12.5")


@pytest.mark.parametrize(
    "provider_id",
    ["wd:" + "0" * 64, "alchemy:0x" + "7a" * 32 + ":110", "gen:evt-1", "x" * 400, "a\x00b"],
)
async def test_any_provider_id_is_stored_in_the_generic_namespace(
    app: Any, anon: httpx.AsyncClient, usdc_account: str, provider_id: str
) -> None:
    [event] = await deliver(anon, generic(event_id=provider_id))
    assert event["result"] == "recorded"
    assert event["event_id"].startswith(("gen:", "gen-sha256:"))
    assert len(event["event_id"]) <= 200
    [row] = await rows(app, "SELECT event_id FROM payment_events")
    assert row["event_id"] == event["event_id"]
    assert (await deliver(anon, generic(event_id=provider_id)))[0] == {
        "event_id": event["event_id"],
        "result": "duplicate",
    }


async def test_a_reused_provider_id_with_other_content_is_ambiguous_not_a_duplicate(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    assert (await deliver(anon, generic()))[0]["result"] == "recorded"
    [other] = await deliver(anon, generic(amount="999"))
    assert (other["result"], other["reason"]) == ("unmatched", "ambiguous_id")
    assert other["event_id"].startswith("gen-review:")
    assert (await deliver(anon, generic(amount="999")))[0] == other
    assert (await deliver(anon, generic()))[0]["result"] == "duplicate"
    await post_all(app)
    assert await balance(app, usdc_account) == Decimal("12.5")
    assert len(await rows(app, "SELECT 1 FROM unmatched_provider_events")) == 1


# --- item 7: each activity of a delivery stands alone


async def test_a_nul_spam_token_does_not_lose_the_genuine_deposit(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    genuine = token_activity(USDC_ADDRESS, 7_000_000, log_index=1)
    spam = token_activity(
        USDC_ADDRESS,
        10**24,
        asset="Visit\x00spam.io",
        decimals=18,
        log_index=2,
        contract=FOREIGN_CONTRACT,
    )
    spam["erc1155Metadata"] = None
    spam["value"] = "claim \x00 now"
    body = orjson.dumps(webhook(genuine, spam))
    assert b"\\u0000" in body
    tx = "0x" + "7a" * 32
    events = await deliver(anon, body)
    assert events == [
        {"event_id": f"alchemy:{tx}:1", "result": "recorded"},
        {"event_id": f"alchemy:{tx}:2", "result": "unmatched", "reason": "unknown_token"},
    ]
    [pending] = await rows(app, "SELECT event_id, amount, status FROM payment_events")
    assert (pending["event_id"], pending["amount"], pending["status"]) == (
        f"alchemy:{tx}:1",
        Decimal("7"),
        "pending",
    )
    outbox = await rows(app, "SELECT topic, payload FROM outbox")
    assert [(o["topic"], o["payload"]) for o in outbox] == [
        ("ledger.event", {"version": 1, "event_id": f"alchemy:{tx}:1"})
    ]
    [kept] = await rows(
        app,
        "SELECT u.asset, u.payload, u.position, d.body FROM unmatched_provider_events u"
        " JOIN provider_deliveries d ON d.body_sha256 = u.delivery_sha256",
    )
    assert kept["body"] == body  # the exact bytes, NUL escapes included
    assert kept["position"] == 1
    assert kept["asset"] == "VISIT\\u0000SPAM.IO"
    assert kept["payload"]["value"] == "claim \\u0000 now"
    await post_all(app)
    assert await balance(app, usdc_account) == Decimal("7")


async def test_alchemys_erc721_activity_is_kept_and_the_rest_credited(
    app: Any, anon: httpx.AsyncClient, usdc_account: str, eth_account: str
) -> None:
    events = await deliver(
        anon,
        webhook(
            nft_activity(USDC_ADDRESS),
            token_activity(USDC_ADDRESS, 1_500_000),
            eth_activity(ETH_ADDRESS, 2 * 10**18),
        ),
    )
    assert [(e["result"], e.get("reason")) for e in events] == [
        ("unmatched", "nft"),
        ("recorded", None),
        ("recorded", None),
    ]
    await post_all(app)
    assert await balance(app, usdc_account) == Decimal("1.5")
    assert await balance(app, eth_account) == Decimal("2")


async def test_internal_transfers_without_trace_address_never_collapse(
    app: Any, anon: httpx.AsyncClient, eth_account: str
) -> None:
    tx = "0x" + "9c" * 32
    one = internal_activity(ETH_ADDRESS, 10**18, tx_hash=tx, trace=None)
    two = internal_activity(ETH_ADDRESS, 3 * 10**18, tx_hash=tx, trace=None)
    first = await deliver(anon, webhook(one, two))
    assert [e["result"] for e in first] == ["recorded", "recorded"]
    assert first[0]["event_id"] != first[1]["event_id"]
    # A true duplicate (the same content re-delivered) is still a duplicate.
    assert [e["result"] for e in await deliver(anon, webhook(one, two))] == ["duplicate"] * 2
    # The same transfer twice where nothing tells them apart: the second is kept.
    twice = await deliver(anon, webhook(one, one))
    assert [(e["result"], e.get("reason")) for e in twice] == [
        ("duplicate", None),
        ("unmatched", "ambiguous_id"),
    ]
    assert await deliver(anon, webhook(one, one)) == twice
    await post_all(app)
    assert await balance(app, eth_account) == Decimal("4")
    assert len(await rows(app, "SELECT 1 FROM unmatched_provider_events")) == 1


async def test_odd_activities_are_kept_and_never_refuse_the_delivery(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    odd: list[tuple[Any, str | None]] = [
        ("a string", "invalid"),
        (None, "invalid"),
        ({"category": "token"}, "invalid"),
        ({**token_activity(USDC_ADDRESS, 5, log_index=3), "hash": "0x\x00"}, "invalid"),
        (token_activity(USDC_ADDRESS, 0, log_index=4), "zero_value"),
        ({**token_activity(USDC_ADDRESS, 5, log_index=5), "toAddress": "SURROGATE"}, "invalid"),
        (token_activity(USDC_ADDRESS, 9, log_index=6, removed=True), "removed"),
        ({**token_activity(USDC_ADDRESS, 1, log_index=7), "category": "specialnft"}, "nft"),
        ({**token_activity(USDC_ADDRESS, 1, log_index=9), "category": "log"}, "unsupported"),
        ({**token_activity(USDC_ADDRESS, 1, log_index=10), "big": "BIG"}, None),
        (token_activity(USDC_ADDRESS, 4_000_000, log_index=8), None),
    ]
    # A lone surrogate escape is JSON that orjson refuses; it is written as raw text.
    parts = [orjson.dumps(a).replace(b'"SURROGATE"', b'"\\ud800"') for a, _ in odd[:-2]]
    parts.append(orjson.dumps(odd[-2][0]).replace(b'"BIG"', b"1" + b"0" * 30))
    parts.append(orjson.dumps(odd[-1][0]))
    body = (
        b'{"type":"ADDRESS_ACTIVITY","event":{"network":"ETH_MAINNET","activity":['
        + b",".join(parts)
        + b"]}}"
    )
    events = await deliver(anon, body)
    assert [e.get("reason") for e in events] == [reason for _, reason in odd]
    assert len({e["event_id"] for e in events}) == len(events)
    assert len(await rows(app, "SELECT 1 FROM unmatched_provider_events")) == len(events) - 2
    assert await deliver(anon, body) == [
        {**e, "result": "duplicate"} if e["result"] == "recorded" else e for e in events
    ]
    await post_all(app)
    assert await balance(app, usdc_account) == Decimal("4.000001")
