"""Provider ingress against the token registry and the provider id namespaces,
on the real PostgreSQL; balances are checked after
`post_event`, the path the ledger worker runs."""

# ruff: noqa: F401, F811 - pytest fixtures imported from ingress_support are used as parameters

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import orjson
import pytest

from payflow.db.tx import transaction
from payflow.payments.finalize import SUCCEEDED, finalize
from payflow.payments.records import load_payment

from .alchemy import (
    USDC_CONTRACT,
    eth_activity,
    token_activity,
    webhook,
)
from .ingress_support import (
    DAI_CONTRACT,
    ETH_ADDRESS,
    FOREIGN_CONTRACT,
    USDC_ADDRESS,
    USDT_CONTRACT,
    deliver,
    eth_account,
    generic,
    incoming,
    post_all,
    rows,
    usdc_account,
)

# --- item 1: which asset and how much come from the registry, never from the payload


async def test_usdc_symbol_from_a_foreign_contract_credits_nothing(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    forged = token_activity(USDC_ADDRESS, 1_000 * 10**6, contract=FOREIGN_CONTRACT)
    [event] = await deliver(anon, webhook(forged))
    assert (event["result"], event["reason"]) == ("unmatched", "unknown_token")
    await post_all(app)
    assert await incoming(app, usdc_account) == 0
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
    assert await incoming(app, usdc_account) == Decimal("2.500004")


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
    assert await incoming(app, eth_account) == Decimal("1.5")
    assert await incoming(app, usdc_account) == Decimal("12.5")


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
    assert stored == {  # the provider's event is a chain report, not a credit
        f"payment:{payment_id}": (str(settlement["id"]), Decimal("10.00"), "confirmed"),
    }
    [report] = await rows(app, "SELECT provider_event_id FROM chain_deposit_reports")
    assert report["provider_event_id"] == f"gen:payment:{payment_id}"
    assert settlement["balance"] == Decimal("10.00")
    assert await incoming(app, usdc_account) == Decimal("12.5")


@pytest.mark.parametrize(
    "provider_id",
    [
        "wd:" + "0" * 64,
        "alchemy:0x" + "7a" * 32 + ":110",
        "gen:evt-1",
        "x" * 400,
        "a\x00b",
        "a/b?c#d",
        "café",
    ],
)
async def test_any_provider_id_is_stored_in_the_generic_namespace(
    app: Any,
    anon: httpx.AsyncClient,
    client: httpx.AsyncClient,
    usdc_account: str,
    provider_id: str,
) -> None:
    [event] = await deliver(anon, generic(event_id=provider_id))
    assert event["result"] == "recorded"
    assert event["event_id"].startswith(("gen:", "gen-sha256:"))
    assert len(event["event_id"]) <= 200
    [row] = await rows(app, "SELECT provider_event_id FROM chain_deposit_reports")
    assert row["provider_event_id"] == event["event_id"]
    assert await rows(app, "SELECT 1 FROM payment_events") == []
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
    assert await incoming(app, usdc_account) == Decimal("12.5")
    assert len(await rows(app, "SELECT 1 FROM unmatched_provider_events")) == 1


async def test_no_odd_value_in_any_generic_field_is_refused_or_changes_the_amount(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    """Each field of a generic 12.5 USDC event replaced by each odd JSON value: always
    202, and whatever is credited is exactly 12.5 USDC to the USDC account."""
    odd_values = [
        b"null",
        b"true",
        b"0",
        b"1.5",
        b"1" + b"0" * 30,
        b"1e999",
        b'""',
        b'"\\u0000"',
        b'"\\ud800"',
        b'"' + b"x" * 1000 + b'"',
        b"[]",
        b'{"a": "\\u0000"}',
        b'"0x"',
    ]
    fields = [
        "event_id",
        "event_type",
        "to_address",
        "asset",
        "amount",
        "tx_hash",
        "chain",
        "contract_address",
    ]
    results: list[str] = []
    for field in fields:
        for number, value in enumerate(odd_values):
            event = {**generic(event_id=f"odd-{field}-{number}"), field: "@ODD@"}
            body = orjson.dumps(event).replace(b'"@ODD@"', value)
            [result] = await deliver(anon, body)
            results.append(result["result"])
    assert set(results) <= {"recorded", "unmatched", "duplicate"}
    stored = await rows(app, "SELECT account_id, amount FROM chain_deposit_reports")
    assert {(str(r["account_id"]), r["amount"]) for r in stored} <= {
        (usdc_account, Decimal("12.5"))
    }
    unmatched = await rows(app, "SELECT count(*) AS n FROM unmatched_provider_events")
    assert unmatched[0]["n"] == results.count("unmatched") > 0
    await post_all(app)
    assert await incoming(app, usdc_account) == Decimal("12.5") * len(stored)


# --- item 6 at the edge: a deposit above the asset's max_deposit is kept, never credited


async def test_deposits_above_the_limit_are_kept_for_review_and_credit_nothing(
    app: Any, anon: httpx.AsyncClient, eth_account: str
) -> None:
    def eth(event_id: str, amount: str) -> dict[str, Any]:
        event = generic(event_id=event_id, to_address=ETH_ADDRESS, asset="ETH", amount=amount)
        del event["contract_address"]
        return event

    big = "60000000000000000000"  # two of these together would overflow a balance
    results = [(await deliver(anon, eth(f"big-{n}", big)))[0] for n in (1, 2)]
    assert [(r["result"], r["reason"]) for r in results] == [("unmatched", "over_limit")] * 2
    at_limit = await deliver(anon, eth("at-limit", "1000000"))  # ETH max_deposit 1,000,000
    assert at_limit[0]["result"] == "recorded"
    await post_all(app)
    assert await incoming(app, eth_account) == Decimal("1000000")
    kept = await rows(app, "SELECT reason, detail FROM unmatched_provider_events ORDER BY 1")
    assert [k["reason"] for k in kept] == ["over_limit", "over_limit"]
    assert all("max_deposit" in k["detail"] for k in kept)
    assert await rows(app, "SELECT 1 FROM payment_events WHERE event_id LIKE 'gen:big-%'") == []
