"""Big numbers through the HTTP API: every stored amount reads back
exactly, and the edges refuse amounts above the asset's limit with a 422 naming it."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from typing import Any

import httpx
import orjson

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.limits import set_limits
from payflow.ledger.posting import post_event
from payflow.ledger.recon import reconcile
from payflow.payments.finalize import SUCCEEDED, credit_event_id, finalize
from payflow.payments.records import load_payment
from payflow.webhooks.sender import webhook_body
from tests.integration.ingress.ingress_support import credit_as_the_node_would
from tests.processes import PAYFLOW_MAIN, run_payflow

from .conftest import signed
from .server import server_env

# The registry's contracts (migration 0005): a token deposit must name its contract.
TOKEN_CONTRACTS = {
    "DAI": "0x6b175474e89094c44da98b954eedeac495271d0f",
    "USDC": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
}
CLI = PAYFLOW_MAIN


def key() -> dict[str, str]:
    return {"Idempotency-Key": uuid.uuid4().hex}


def payment(amount: str, currency: str = "RUB") -> dict[str, Any]:
    return {"amount": amount, "currency": currency, "description": "big"}


async def _account(client: httpx.AsyncClient, asset: str) -> str:
    response = await client.post("/api/v1/accounts", json={"asset": asset})
    assert response.status_code == 201, response.text
    account_id: str = response.json()["account_id"]
    return account_id


async def _deposit(
    app: Any,
    anon: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    account_id: str,
    asset: str,
    amount: str,
) -> str:
    address = "0x" + uuid.uuid4().hex[:20] * 2
    assigned = await admin.post(
        f"/api/v1/accounts/{account_id}/deposit-addresses",
        json={"chain": "ETH_MAINNET", "address": address},
    )
    assert assigned.status_code == 201, assigned.text
    body = orjson.dumps(
        {
            "event_id": f"dep-{uuid.uuid4().hex}",
            "event_type": "deposit",
            "to_address": address,
            "asset": asset,
            "amount": amount,
            "tx_hash": "0x" + uuid.uuid4().hex * 2,
            **({"contract_address": TOKEN_CONTRACTS[asset]} if asset in TOKEN_CONTRACTS else {}),
        }
    )
    response = await anon.post("/api/v1/webhooks/provider", content=body, headers=signed(body))
    assert response.status_code in (200, 202), response.text
    assert response.json()["events"][0]["result"] == "recorded"
    [event_id] = await credit_as_the_node_would(app)  # only the node's word credits
    return event_id


async def _count(app: Any, sql: str) -> int:
    async with app.state.api.pool.acquire() as conn:
        value: int = await conn.fetchval(sql)
    return value


async def test_ten_billion_eth_deposit_reads_back_exactly(
    app: Any,
    client: httpx.AsyncClient,
    anon: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    owner_pool: Any,
) -> None:
    """The named input: GET on the event, the account and its entries answered 500.
    (Above ETH's default max_deposit of 1,000,000: an operator raised it first.)"""
    async with owner_pool.acquire() as conn, transaction(conn, app.state.api.settings):
        await set_limits(conn, "ETH", deposit="10000000000")
    account_id = await _account(client, "ETH")
    event_id = await _deposit(app, anon, admin, account_id, "ETH", "10000000000")
    exact = "10000000000.000000000000000000"

    event = await client.get(f"/api/v1/events/{event_id}")
    assert event.status_code == 200, event.text
    assert (event.json()["amount"], event.json()["outcome"]) == (exact, "success")
    account = await client.get(f"/api/v1/accounts/{account_id}")
    assert account.status_code == 200, account.text
    assert account.json()["balance"] == exact
    entries = await client.get(f"/api/v1/accounts/{account_id}/entries")
    assert entries.status_code == 200, entries.text
    [entry] = entries.json()["items"]
    assert (entry["amount"], entry["balance_after"]) == (exact, exact)


async def test_balances_beyond_ten_to_the_twenty_read_back_exactly(
    app: Any,
    client: httpx.AsyncClient,
    anon: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    owner_pool: Any,
) -> None:
    """Two 38-digit amounts: the balance needs 39 digits and still renders at scale 18."""
    account_id = await _account(client, "DAI")
    async with owner_pool.acquire() as conn, transaction(conn, app.state.api.settings):
        await set_limits(conn, "DAI", deposit="99999999999999999999.999999999999999999")
    amount = "99999999999999999999.999999999999999999"
    await _deposit(app, anon, admin, account_id, "DAI", amount)
    await _deposit(app, anon, admin, account_id, "DAI", amount)

    account = await client.get(f"/api/v1/accounts/{account_id}")
    assert account.json()["balance"] == "199999999999999999999.999999999999999998"
    entries = (await client.get(f"/api/v1/accounts/{account_id}/entries")).json()["items"]
    assert [e["balance_after"] for e in entries] == [
        "199999999999999999999.999999999999999998",
        amount,
    ]
    assert (await reconcile(app.state.api.pool, app.state.api.settings, full=True)).clean


async def test_payment_above_the_limit_is_422_naming_it_and_writes_nothing(
    app: Any, client: httpx.AsyncClient
) -> None:
    for amount in ("99999999999999999999.99", "1000000000.01"):
        response = await client.post("/api/v1/payments", json=payment(amount), headers=key())
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert "max_payment" in problem["detail"] and "RUB" in problem["detail"]
        assert "1000000000.00" in problem["detail"]
        assert problem["errors"][0]["field"] == "body.amount"
    assert await _count(app, "SELECT count(*) FROM payments") == 0
    assert await _count(app, "SELECT count(*) FROM api_idempotency") == 0
    assert await _count(app, "SELECT count(*) FROM outbox") == 0


async def _pay_and_post(app: Any, client: httpx.AsyncClient, amount: str) -> uuid.UUID:
    """Create a RUB payment through the API, finalise it as succeeded and post its credit."""
    pool, settings = app.state.api.pool, app.state.api.settings
    created = await client.post("/api/v1/payments", json=payment(amount), headers=key())
    assert created.status_code == 202, created.text
    payment_id = uuid.UUID(created.json()["payment_id"])
    async with pool.acquire() as conn, transaction(conn, settings):
        await finalize(conn, await load_payment(conn, payment_id), SUCCEEDED, "trace")
    result = await post_event(pool, settings, credit_event_id(payment_id))
    assert result.outcome.value == "success"
    return payment_id


async def test_payments_at_the_limit_are_accepted_credited_and_rendered(
    app: Any, client: httpx.AsyncClient
) -> None:
    await _pay_and_post(app, client, "1000000000.00")
    payment_id = await _pay_and_post(app, client, "1000000000")  # posts on top of the first

    pool = app.state.api.pool
    account_id = await pool.fetchval("SELECT id FROM accounts WHERE settlement AND asset = 'RUB'")
    account = await client.get(f"/api/v1/accounts/{account_id}")
    assert account.json()["balance"] == "2000000000.00"
    read = await client.get(f"/api/v1/payments/{payment_id}")
    assert (read.json()["amount"], read.json()["status"]) == ("1000000000.00", "succeeded")
    async with pool.acquire() as conn:
        body = orjson.loads(webhook_body(await load_payment(conn, payment_id)))
    assert body["amount"] == "1000000000.00"
    assert (await reconcile(pool, app.state.api.settings, full=True)).clean


async def test_withdrawal_above_the_limit_is_422_and_at_the_limit_is_accepted(
    app: Any, client: httpx.AsyncClient
) -> None:
    account_id = await _account(client, "ETH")
    over = await client.post(
        f"/api/v1/accounts/{account_id}/withdrawals",
        json={"amount": "1000000.000000000000000001"},
        headers=key(),
    )
    assert over.status_code == 422, over.text
    assert "max_withdrawal of ETH (1000000.000000000000000000)" in over.json()["detail"]
    assert over.json()["errors"][0]["field"] == "body.amount"
    assert await _count(app, "SELECT count(*) FROM payment_events") == 0
    at = await client.post(
        f"/api/v1/accounts/{account_id}/withdrawals", json={"amount": "1000000"}, headers=key()
    )
    assert at.status_code == 202, at.text
    assert await _count(app, "SELECT count(*) FROM payment_events") == 1


async def test_an_operator_limit_applies_at_the_edge(
    app: Any, client: httpx.AsyncClient, owner_pool: Any
) -> None:
    async with owner_pool.acquire() as conn, transaction(conn, app.state.api.settings):
        await set_limits(conn, "USD", payment="100.00")
    ok = await client.post("/api/v1/payments", json=payment("100", "USD"), headers=key())
    assert ok.status_code == 202, ok.text
    over = await client.post("/api/v1/payments", json=payment("100.01", "USD"), headers=key())
    assert over.status_code == 422
    assert "max_payment of USD (100.00)" in over.json()["detail"]


async def test_a_retry_is_answered_after_the_limit_was_lowered(
    app: Any, client: httpx.AsyncClient, owner_pool: Any
) -> None:
    """After `assets set-limit` lowers max_payment, the retry of a payment already made
    still gets its payment, never a 422 (which a client reads as "not created"), from the
    stored record and from the payment row alike. The limit applies to new payments."""
    headers = {"Idempotency-Key": "limit-then-retry"}
    made = await client.post("/api/v1/payments", json=payment("10.00", "USD"), headers=headers)
    assert made.status_code == 202, made.text
    async with owner_pool.acquire() as conn, transaction(conn, app.state.api.settings):
        await set_limits(conn, "USD", payment="1.00")
    again = await client.post("/api/v1/payments", json=payment("10.00", "USD"), headers=headers)
    assert (again.status_code, again.json()) == (202, made.json())
    async with owner_pool.acquire() as conn:
        await conn.execute("DELETE FROM api_idempotency WHERE key = 'limit-then-retry'")
    after_retention = await client.post(
        "/api/v1/payments", json=payment("10.00", "USD"), headers=headers
    )
    assert after_retention.status_code == 202, after_retention.text
    assert after_retention.json()["payment_id"] == made.json()["payment_id"]
    new = await client.post("/api/v1/payments", json=payment("10.00", "USD"), headers=key())
    assert new.status_code == 422 and "max_payment of USD (1.00)" in new.json()["detail"]
    assert await _count(app, "SELECT count(*) FROM payments") == 1


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return run_payflow(["assets", *args], server_env(settings), command=CLI)


async def test_assets_cli_lists_and_sets_limits(app: Any, api_settings: Settings) -> None:
    changed = await asyncio.to_thread(
        _cli, api_settings, "set-limit", "EUR", "--payment", "250.5", "--deposit", "7"
    )
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.strip() == (
        "EUR: max_payment=250.50 max_withdrawal=1000000000.00 max_deposit=7.00"
    )
    listed = await asyncio.to_thread(_cli, api_settings, "list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in listed.stdout.splitlines()}
    assert rows["EUR"] == ["2", "250.50", "1000000000.00", "7.00"]
    assert rows["ETH"][1] == "1000000.000000000000000000"

    unknown = await asyncio.to_thread(_cli, api_settings, "set-limit", "DOGE", "--payment", "1")
    assert unknown.returncode == 1 and "unknown asset 'DOGE'" in unknown.stderr
    too_fine = await asyncio.to_thread(_cli, api_settings, "set-limit", "EUR", "--payment", "0.001")
    assert too_fine.returncode == 1 and "--payment" in too_fine.stderr
    nothing = await asyncio.to_thread(_cli, api_settings, "set-limit", "EUR")
    assert nothing.returncode == 2 and "at least one" in nothing.stderr
    async with app.state.api.pool.acquire() as conn:
        stored = await conn.fetchval("SELECT max_payment FROM assets WHERE code = 'EUR'")
    assert str(stored) == "250.500000000000000000"
