"""Shared set-up for the provider ingress tests: accounts with deposit addresses,
signed deliveries, and posting pending events as the ledger worker would."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import httpx
import orjson
import pytest

from payflow.ledger.posting import post_event
from tests.integration.api.conftest import signed

from .alchemy import USDC_CONTRACT

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


async def incoming(app: Any, account_id: str) -> Decimal:
    """The account's `pending_incoming`: deposits reported, waiting for the node (a
    provider's webhook never credits by itself, so `balance` stays as it was)."""
    from payflow.chain.deposits import pending_incoming

    async with app.state.api.pool.acquire() as conn:
        return await pending_incoming(conn, uuid.UUID(account_id))


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


async def credit_as_the_node_would(app: Any) -> list[str]:
    """Stand-in for the node in API tests without one: every pending report is taken
    as verified at a final block and credited through the lifecycle's own `credit`
    (the exactly-once path). Returns the credit event ids (`chain:<transfer id>`)."""
    from payflow.chain.deposits import SQL as CHAIN_SQL
    from payflow.chain.deposits import destination, record_verified
    from payflow.chain.lifecycle import credit, credit_event_id
    from payflow.chain.transfers import Transfer, transfer_id
    from payflow.db.tx import transaction

    pool, settings = app.state.api.pool, app.state.api.settings
    block_hash = "0x" + "00" * 32
    credited = []
    for report in await rows(app, "SELECT * FROM chain_deposit_reports WHERE status = 'pending'"):
        position = report["position"] if report["position"] is not None else 0
        tid = transfer_id(report["chain"], report["tx_hash"], position)
        transfer = Transfer(
            report["chain"],
            report["tx_hash"],
            position,
            report["to_address"],
            report["contract"],
            int(report["units"]),
        )
        async with pool.acquire() as conn, transaction(conn, settings):
            found = await destination(
                conn, report["chain"], report["to_address"], report["contract"]
            )
            assert not isinstance(found, str), found
            await record_verified(
                conn,
                transfer_id=tid,
                transfer=transfer,
                destination=found,
                block=(1, block_hash),
                source=report["source"],
                trace_id=report["trace_id"],
            )
            await conn.execute(CHAIN_SQL["confirm_report"], report["id"], tid)
        assert await credit(pool, settings, {"transfer_id": tid, "block_hash": block_hash})
        credited.append(credit_event_id(tid))
    return credited
