"""The whole system through its public HTTP API: `payflow up` as a real OS process.

A merchant's payment goes in through `POST /api/v1/payments` and comes out as exactly
one signed webhook and one ledger credit; a provider deposit to an assigned address,
delivered more than once, is credited once. The process then stops on SIGTERM with
exit code 0. Real PostgreSQL, RabbitMQ (own vhost) and Redis (own key prefix); the
test polls with generous deadlines and asserts no timings.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.ingress.registry import USDC_ETH_MAINNET
from payflow.ingress.service import assign_address
from payflow.ingress.signature import sign
from payflow.ledger.accounts import create_account
from payflow.ledger.recon import reconcile
from payflow.payments.finalize import credit_event_id
from payflow.webhooks.sender import webhook_id
from payflow.webhooks.signing import verify
from payflow_lab.bench.http_submit import DepositAddress, HttpSubmitter
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.ports import free_port
from payflow_lab.supervisor import spawn_payflow
from tests.conftest import redis_prefix
from tests.integration.support import wait_until

ROOT = Path(__file__).resolve().parents[2]
PROVIDER_SECRET = "e2e-provider-secret-0123456789abcdef"
LIMIT_S = 90.0


@dataclass(frozen=True, slots=True)
class Tenant:
    merchant_id: uuid.UUID
    api_key: str
    webhook_secret: str
    admin_key: str


@dataclass
class Up:
    """A running `payflow up` and a client for its API."""

    process: subprocess.Popen[bytes]
    log_path: Path
    client: httpx.AsyncClient
    port: int

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _env(settings: Settings, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("API_KEY", "ADMIN_API_KEY")}
    env.update(
        DATABASE_URL=settings.database_url,
        RABBITMQ_URL=settings.rabbitmq_url,
        REDIS_URL=settings.redis_url,
        REDIS_KEY_PREFIX=redis_prefix("e2e"),
        API_HOST="127.0.0.1",
        API_PORT=str(port),
        PROVIDER_WEBHOOK_SECRET=PROVIDER_SECRET,
        WEBHOOK_ALLOW_HOSTS="127.0.0.1",
        GATEWAY_DELAY_MIN_S="0",
        GATEWAY_DELAY_MAX_S="0",
        GATEWAY_FAILURE_RATE="0",
        RETRY_TIERS_MS="200,400,800",
        RELAY_POLL_INTERVAL_S="0.5",
        SCHEDULER_INTERVAL_S="0.5",
        DB_POOL_MIN="1",
        DB_POOL_MAX="8",
        LOG_JSON="false",
        LOG_LEVEL="INFO",
    )
    return env


@pytest.fixture
async def tenant(pool: asyncpg.Pool) -> Tenant:
    """A merchant (API key + webhook secret, shown once) and an operator key."""
    async with pool.acquire() as conn:
        merchant_id, api_key, secret = await create_merchant(conn, "shop", admin=False)
        _, admin_key, _ = await create_merchant(conn, "ops", admin=True)
    return Tenant(merchant_id, api_key, secret, admin_key)


@pytest.fixture
async def up(pipe_settings: Settings, tenant: Tenant, tmp_path: Path) -> AsyncIterator[Up]:
    """`payflow up` on a free port, healthy (GET /health with the merchant's key)."""
    port = free_port()
    log_path = tmp_path / "up.log"
    process = spawn_payflow(["up"], _env(pipe_settings, port), log_path, cwd=ROOT)
    client = httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", headers={"X-API-Key": tenant.api_key}, timeout=10
    )
    running = Up(process, log_path, client, port)
    try:

        async def healthy() -> bool:
            assert process.poll() is None, running.log()
            try:
                return (await client.get("/health")).status_code == 200
            except httpx.TransportError:
                return False

        await wait_until(healthy, limit_s=LIMIT_S, what="GET /health to answer 200")
        yield running
    finally:
        await client.aclose()
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


async def _poll_json(client: httpx.AsyncClient, path: str, ready: Any, what: str) -> Any:
    """GET `path` until `ready(body)` holds; return the body."""

    async def check() -> Any:
        response = await client.get(path)
        if response.status_code != 200:
            return None
        body = response.json()
        return body if ready(body) else None

    return await wait_until(check, limit_s=LIMIT_S, what=what)


async def _stop(up: Up) -> int:
    up.process.terminate()
    return await asyncio.to_thread(up.process.wait, 60)


async def test_payment_through_the_api_is_charged_credited_and_notified_once(
    pool: asyncpg.Pool, pipe_settings: Settings, tenant: Tenant, sink: WebhookSink, up: Up
) -> None:
    response = await up.client.post(
        "/api/v1/payments",
        json={
            "amount": "10.50",
            "currency": "RUB",
            "description": "order 1",
            "metadata": {"order_id": "1"},
            "webhook_url": sink.url,
        },
        headers={"Idempotency-Key": "order-1"},
    )
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["status"] == "pending"
    payment_id = uuid.UUID(accepted["payment_id"])

    payment = await _poll_json(
        up.client,
        f"/api/v1/payments/{payment_id}",
        lambda p: p["status"] == "succeeded" and p["webhook_delivered_at"] is not None,
        "the payment to succeed and its webhook to be delivered",
    )
    credit = await _poll_json(
        up.client,
        f"/api/v1/events/{credit_event_id(payment_id)}",
        lambda e: e["status"] == "confirmed",
        "the merchant credit to be confirmed",
    )
    returncode = await _stop(up)
    assert returncode == 0, up.log()

    assert payment["amount"] == "10.50"
    assert payment["webhook_attempts"] == 1
    assert payment["processed_at"] is not None
    # Exactly one POST reached the sink (checked after the process stopped), and it verifies.
    assert len(sink.received) == 1
    request = sink.received[0]
    assert request.headers["webhook-id"] == webhook_id(payment_id)
    assert verify(
        tenant.webhook_secret,
        request.headers["webhook-id"],
        int(request.headers["webhook-timestamp"]),
        request.body,
        request.headers["webhook-signature"],
    )
    assert orjson.loads(request.body) == {
        "payment_id": str(payment_id),
        "status": "succeeded",
        "amount": "10.50",
        "currency": "RUB",
    }
    # The settlement account holds the amount, through exactly one ledger row.
    account_id = credit["account_id"]
    settlement = await pool.fetchrow(
        "SELECT merchant_id, settlement, balance FROM accounts WHERE id = $1",
        uuid.UUID(account_id),
    )
    assert settlement["merchant_id"] == tenant.merchant_id and settlement["settlement"]
    assert settlement["balance"] == Decimal("10.50")
    rows = await pool.fetchval(
        "SELECT count(*) FROM balance_events WHERE account_id = $1", uuid.UUID(account_id)
    )
    assert rows == 1
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 1
    assert (await reconcile(pool, pipe_settings, full=True)).clean


async def test_signed_deposit_delivered_twice_waits_for_the_node(
    pool: asyncpg.Pool, pipe_settings: Settings, tenant: Tenant, up: Up
) -> None:
    created = await up.client.post("/api/v1/accounts", json={"asset": "USDC"})
    assert created.status_code == 201, created.text
    account_id = created.json()["account_id"]
    address = "0x" + "ab12" * 10
    assigned = await up.client.post(
        f"/api/v1/accounts/{account_id}/deposit-addresses",
        json={"chain": "ETH_MAINNET", "address": address},
        headers={"X-API-Key": tenant.admin_key},
    )
    assert assigned.status_code == 201, assigned.text

    body = orjson.dumps(
        {
            "event_id": "dep-e2e-1",
            "event_type": "deposit",
            "to_address": address,
            "asset": "USDC",
            "amount": "25.000001",
            "tx_hash": "0x" + hashlib.sha256(b"dep-e2e-1").hexdigest(),
            "contract_address": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",  # USDC
        }
    )
    headers = {
        pipe_settings.provider_signature_header: sign(body, PROVIDER_SECRET.encode()),
        "Content-Type": "application/json",
    }

    async def deliver() -> str:
        response = await up.client.post("/api/v1/webhooks/provider", content=body, headers=headers)
        assert response.status_code == 202, response.text
        [event] = response.json()["events"]
        assert event["event_id"] == "gen:dep-e2e-1"  # the provider's id, namespaced
        result: str = event["result"]
        return result

    assert await deliver() == "recorded"
    assert await deliver() == "duplicate"
    account = (await up.client.get(f"/api/v1/accounts/{account_id}")).json()
    returncode = await _stop(up)
    assert returncode == 0, up.log()

    # Without a node (ETH_RPC_URL unset) a provider's deposit is a report that
    # waits for the chain: shown as pending_incoming, never credited unverified.
    assert (account["balance"], account["pending_incoming"]) == ("0.000000", "25.000001")
    assert await pool.fetchval("SELECT count(*) FROM chain_deposit_reports") == 1
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 0
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE topic = 'ledger.event'") == 0
    assert (await reconcile(pool, pipe_settings, full=True)).clean


async def test_the_bench_http_submitter_lands_payments_and_deposits_once(
    pool: asyncpg.Pool, pipe_settings: Settings, tenant: Tenant, sink: WebhookSink, up: Up
) -> None:
    """`payflow bench e2e`'s default submitter, against the real API; retries are no-ops."""
    address = "0x" + "cd" * 20
    async with pool.acquire() as conn:
        account = await create_account(conn, "USDC")
        await assign_address(conn, "ETH_MAINNET", address, account.id)
    target = {account.id: DepositAddress("ETH_MAINNET", address, "USDC", USDC_ETH_MAINNET)}
    async with HttpSubmitter(
        "127.0.0.1",
        up.port,
        api_key=tenant.api_key,
        provider_secret=PROVIDER_SECRET,
        signature_header=pipe_settings.provider_signature_header,
        addresses=target,
        max_connections=2,
    ) as submitter:
        payment_id = await submitter.submit_payment(
            tenant.merchant_id, "1.25", "USD", "bench-1", sink.url
        )
        await submitter.submit_deposit("bench-dep-1", account.id, "2.50")
        # The same submissions again: the same payment, and a duplicate event (still 202).
        again = await submitter.submit_payment(
            tenant.merchant_id, "1.25", "USD", "bench-1", sink.url
        )
        await submitter.submit_deposit("bench-dep-1", account.id, "2.50")
    assert again == payment_id

    await wait_until(
        lambda: pool.fetchval(
            "SELECT (SELECT count(*) FROM payments WHERE webhook_delivered_at IS NOT NULL)"
            " + (SELECT count(*) FROM payment_events WHERE status = 'confirmed')"
            " + (SELECT count(*) FROM chain_deposit_reports)"
            " = 3"  # the delivered payment, its merchant credit, the deposit's one report
        ),
        limit_s=LIMIT_S,
        what="the payment delivered and both ledger events confirmed",
    )
    returncode = await _stop(up)
    assert returncode == 0, up.log()
    assert await pool.fetchval("SELECT count(*) FROM payments") == 1
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 1
    balance = await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account.id)
    assert balance == 0  # the deposit waits for the node (no ETH_RPC_URL here)
    assert len(sink.received) == 1
