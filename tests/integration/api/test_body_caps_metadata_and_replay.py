"""Provider body caps, CLI text, replay of kept deposits and metadata storage.

A signed provider delivery is never refused for its size below
`PROVIDER_MAX_BODY_BYTES`: a 413 is retried by the provider, byte for byte, until it
gives up, and every deposit in the delivery is lost (class 7: nothing a provider sends
is refused for being unusual)."""

from __future__ import annotations

import asyncio
import subprocess
from decimal import Decimal
from typing import Any

import httpx
import orjson
import pytest

from payflow.config import Settings
from tests.integration.ingress.alchemy import token_activity, webhook
from tests.processes import PAYFLOW_MAIN, run_payflow

from .conftest import signed
from .server import server_env

URL = "/api/v1/webhooks/provider"
CLI = PAYFLOW_MAIN
ADDRESS = "0x" + "ab" * 20


async def _usdc_account(client: httpx.AsyncClient, admin: httpx.AsyncClient) -> str:
    account = (await client.post("/api/v1/accounts", json={"asset": "USDC"})).json()
    response = await admin.post(
        f"/api/v1/accounts/{account['account_id']}/deposit-addresses",
        json={"chain": "ETH_MAINNET", "address": ADDRESS},
    )
    assert response.status_code == 201, response.text
    account_id: str = account["account_id"]
    return account_id


async def test_a_delivery_of_600_activities_is_landed_not_refused(
    app: Any, client: httpx.AsyncClient, admin: httpx.AsyncClient, anon: httpx.AsyncClient
) -> None:
    """600 Alchemy activities (about 1 KB each, as Alchemy sends them) were a 413 at the
    64 KiB `MAX_BODY_BYTES`; now each one is landed: 599 strangers' transfers kept as
    `unknown_address`, and the one to our address recorded for 3 USDC."""
    account = await _usdc_account(client, admin)
    strangers = [
        token_activity("0x" + format(i, "040x"), 1_000_000, tx_hash="0x" + format(i, "064x"))
        for i in range(1, 600)
    ]
    ours = token_activity(ADDRESS, 3_000_000, tx_hash="0x" + "ee" * 32)
    body = orjson.dumps(webhook(*strangers, ours))
    assert len(body) > app.state.api.settings.max_body_bytes

    response = await anon.post(URL, content=body, headers=signed(body))

    assert response.status_code == 202, response.text[:300]
    events = response.json()["events"]
    assert len(events) == 600
    assert [e["reason"] for e in events[:599]] == ["unknown_address"] * 599
    assert events[599] == {"event_id": f"alchemy:0x{'ee' * 32}:110", "result": "recorded"}
    async with app.state.api.pool.acquire() as conn:
        landed = await conn.fetch("SELECT account_id, amount FROM chain_deposit_reports")
        kept = await conn.fetchval("SELECT count(*) FROM unmatched_provider_events")
    assert [(str(r["account_id"]), r["amount"]) for r in landed] == [(account, Decimal("3"))]
    assert kept == 599


async def test_other_endpoints_keep_max_body_bytes(app: Any, client: httpx.AsyncClient) -> None:
    """The provider's larger cap is its own: a payment body over MAX_BODY_BYTES is 413."""
    limit = app.state.api.settings.max_body_bytes
    body = b'{"amount":"1.00","currency":"USD","description":"' + b"x" * limit + b'"}'
    response = await client.post(
        "/api/v1/payments",
        content=body,
        headers={"Idempotency-Key": "big", "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert response.json()["detail"] == f"request bodies are limited to {limit} bytes"


async def test_a_delivery_over_the_provider_cap_is_413(app: Any, anon: httpx.AsyncClient) -> None:
    limit = app.state.api.settings.provider_max_body_bytes
    body = b" " * (limit + 1)
    response = await anon.post(URL, content=body, headers=signed(body))
    assert response.status_code == 413
    assert response.json()["detail"] == f"request bodies are limited to {limit} bytes"


# --- the CLI prints operator input and stored text as is -----------------------------
# Its errors went through rich markup: a name holding "[/x]" crashed the command with a
# MarkupError traceback (not one line, exit status 0), and "[eE]" vanished from the
# amount pattern it names.


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return run_payflow(args, server_env(settings), command=CLI)


async def test_cli_errors_print_brackets_as_is_in_one_line(
    app: Any, api_settings: Settings
) -> None:
    unknown = await asyncio.to_thread(
        _cli, api_settings, "assets", "set-limit", "[/x]", "--payment", "1"
    )
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "payflow: NotFound: unknown asset '[/x]'"
    bad = await asyncio.to_thread(
        _cli, api_settings, "assets", "set-limit", "EUR", "--payment", "NaN"
    )
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        "payflow: InvalidAmount: --payment: amount must match"
        " ^[0-9]+(\\.[0-9]+)?([eE][+-]?[0-9]+)?$"
    ]
    review = await asyncio.to_thread(
        _cli, api_settings, "payments", "resolve", "[/red]x", "--approved"
    )
    assert review.returncode != 0
    assert review.stderr.strip() == "payflow: not a payment id: '[/red]x'"


# --- a kept deposit is not stranded: the operator replays its stored delivery ---------
# The provider got 202 for a kept event, so it never resends it; "the provider's next
# retry credits it" never happened, and the deposit stayed on chain uncredited.


async def test_a_kept_deposit_is_credited_by_replaying_its_delivery(
    app: Any,
    client: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    anon: httpx.AsyncClient,
    api_settings: Settings,
) -> None:
    other = token_activity("0x" + "cd" * 20, 5_000_000, tx_hash="0x" + "01" * 32)
    ours = token_activity(ADDRESS, 7_000_000, tx_hash="0x" + "02" * 32)
    body = orjson.dumps(webhook(other, ours))
    first = await anon.post(URL, content=body, headers=signed(body))
    assert [e.get("reason") for e in first.json()["events"]] == [
        "unknown_address",
        "unknown_address",
    ]
    kept_id = first.json()["events"][1]["event_id"]
    account = await _usdc_account(client, admin)  # the operator assigns the address late

    replayed = await asyncio.to_thread(_cli, api_settings, "unmatched", "replay", kept_id)

    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.splitlines() == [
        f"{first.json()['events'][0]['event_id']}\tunmatched\tunknown_address",
        f"alchemy:0x{'02' * 32}:110\trecorded\t",
    ]
    async with app.state.api.pool.acquire() as conn:
        events = await conn.fetch(
            "SELECT provider_event_id, account_id, amount FROM chain_deposit_reports"
        )
        outbox = await conn.fetch("SELECT topic, payload FROM outbox")
    assert [(e["provider_event_id"], str(e["account_id"]), e["amount"]) for e in events] == [
        (f"alchemy:0x{'02' * 32}:110", account, Decimal("7"))
    ]
    assert outbox == []  # a report for the node to verify, not a credit
    again = await asyncio.to_thread(_cli, api_settings, "unmatched", "replay", kept_id)
    assert again.stdout.splitlines()[1] == f"alchemy:0x{'02' * 32}:110\tduplicate\t"
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM chain_deposit_reports") == 1
        assert await conn.fetchval("SELECT count(*) FROM outbox") == 0
    missing = await asyncio.to_thread(_cli, api_settings, "unmatched", "replay", "gen:none")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        "payflow: NotFound: no stored delivery for unmatched event 'gen:none'"
    )


# --- metadata is stored exactly as sent, or refused ------------------------------------
# `-0.0` was stored as `0.0` (jsonb has no negative zero); after the key's retention the
# same request was then judged different from its payment and answered 409.


@pytest.mark.parametrize(
    ("metadata", "named"),
    [
        ('{"a":-0.0}', "-0.0"),
        ('{"a":[1,{"b":-0e5}]}', "-0.0"),
        ('{"a":-0.000}', "-0.0"),
        # Floats from 1e16 came back as integers (10000000000000000), so the same
        # request after retention was a 409 too.
        ('{"a":1e16}', "integer"),
        ('{"a":10000000000000000.0}', "integer"),
        ('{"a":-1.5e18}', "integer"),
        ('{"a":1.8e19}', "integer"),
    ],
)
async def test_metadata_jsonb_would_change_is_refused(
    app: Any, client: httpx.AsyncClient, metadata: str, named: str
) -> None:
    raw = ('{"amount":"1.00","currency":"USD","metadata":' + metadata + "}").encode()
    response = await client.post(
        "/api/v1/payments",
        content=raw,
        headers={"Idempotency-Key": "neg-zero", "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "body.metadata"
    assert named in response.json()["errors"][0]["message"]
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM payments") == 0


async def test_numbers_jsonb_keeps_replay_after_retention(
    app: Any, client: httpx.AsyncClient
) -> None:
    raw = (
        b'{"amount":"1.00","currency":"USD","metadata":'
        b'{"a":-0,"b":0.0,"c":10000000000000000,"d":9999999999999998.0,"e":1e22}}'
    )
    headers = {"Idempotency-Key": "zero", "Content-Type": "application/json"}
    first = await client.post("/api/v1/payments", content=raw, headers=headers)
    assert first.status_code == 202, first.text
    async with app.state.api.pool.acquire() as conn:
        await conn.execute("DELETE FROM api_idempotency")
    again = await client.post("/api/v1/payments", content=raw, headers=headers)
    assert again.status_code == 202, again.text
    assert again.json()["payment_id"] == first.json()["payment_id"]


async def test_a_stored_delivery_the_decoder_now_refuses_is_one_cli_line(
    app: Any, anon: httpx.AsyncClient, owner_pool: Any, api_settings: Settings
) -> None:
    """A delivery kept before duplicate keys were refused cannot be replayed: the CLI
    says so in one line and lands nothing, never a traceback."""
    ours = token_activity(ADDRESS, 7_000_000, tx_hash="0x" + "03" * 32)
    body = orjson.dumps(webhook(ours))
    first = await anon.post(URL, content=body, headers=signed(body))
    kept_id = first.json()["events"][0]["event_id"]
    # As an older payflow stored it: the same delivery with a key named twice.
    await owner_pool.execute(
        "UPDATE provider_deliveries SET body = $1", b'{"type": "x", "type": "y"}'
    )
    replayed = await asyncio.to_thread(_cli, api_settings, "unmatched", "replay", kept_id)
    assert replayed.returncode == 1
    assert replayed.stderr.strip().startswith(
        f"payflow: BadInput: the stored delivery of {kept_id!r} is not a JSON document"
    )
    assert "duplicate key 'type'" in replayed.stderr
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM chain_deposit_reports") == 0
