"""Shared set-up of the deposit lifecycle tests on anvil: settings pointing at the node,
a Redis cache under a unique prefix, accounts with deposit addresses, a registered
test token, reports through the real ingress (`land_event`) and one lifecycle pass."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any
from uuid import UUID

import asyncpg
import orjson
import pytest
from redis.asyncio import Redis

from payflow.chain.deposits import pending_incoming
from payflow.chain.finality import FinalityOracle
from payflow.chain.lifecycle import LifecycleStats, process_deposits
from payflow.config import Settings, load_settings
from payflow.db.tx import transaction
from payflow.ingress.formats import parse_payload
from payflow.ingress.service import Delivery, Landing, assign_address, land_event
from payflow.ledger.accounts import create_account
from payflow_lab.anvil import AnvilNode
from tests.conftest import OWNER_ROLE, redis_prefix
from tests.recording_alerts import RecordingSink

CHAIN = "ETH_MAINNET"


def chain_settings(database_url: str, migration_url: str, rpc_url: str, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "migration_database_url": migration_url,
        "db_owner_role": OWNER_ROLE,
        "redis_key_prefix": redis_prefix("chain"),
        "eth_rpc_url": rpc_url,
        "rpc_timeout_s": 2.0,
        "chain_recheck_s": 0.001,
        "chain_report_grace_s": 0.0,
        "chain_breaker_open_s": 0.5,
        "chain_cache_recent_ttl_s": 0.001,  # the tests mine and look again at once
        "log_json": False,
        "log_level": "WARNING",
    }
    values.update(extra)
    return load_settings(**values)


@pytest.fixture
def settings(database_url: str, migration_url: str, anvil: AnvilNode) -> Settings:
    return chain_settings(database_url, migration_url, anvil.url)


@pytest.fixture
async def redis(settings: Settings) -> AsyncIterator[Redis]:
    client = Redis.from_url("redis://127.0.0.1:6379/0")
    yield client
    keys = [key async for key in client.scan_iter(match=settings.redis_key_prefix + "*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


@pytest.fixture
async def oracle(settings: Settings, redis: Redis) -> AsyncIterator[FinalityOracle]:
    found = FinalityOracle(settings, redis, redis_settings=settings)
    yield found
    await found.aclose()


def new_address() -> str:
    return "0x" + secrets.token_hex(20)


async def open_account(pool: asyncpg.Pool, settings: Settings, asset: str) -> tuple[UUID, str]:
    """An account of `asset` with a fresh deposit address on ETH_MAINNET."""
    address = new_address()
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, asset)
        await assign_address(conn, CHAIN, address, account.id)
    return account.id, address


async def register_token(owner_pool: asyncpg.Pool, contract: str, asset: str = "USDC") -> None:
    await owner_pool.execute(
        "INSERT INTO chain_tokens (chain, contract, asset, decimals) VALUES ($1, $2, $3, 6)",
        CHAIN,
        contract,
        asset,
    )


async def deliver(pool: asyncpg.Pool, settings: Settings, payload: Any) -> list[Landing]:
    """A signed provider delivery, landed by the real ingress service (no HTTP)."""
    body = orjson.dumps(payload)
    delivery = Delivery(body)
    landings = []
    async with pool.acquire() as conn, transaction(conn, settings):
        for event in parse_payload(orjson.loads(body), CHAIN):
            landings.append(
                await land_event(conn, event, "trace-" + event.event_id[-8:], delivery=delivery)
            )
    return landings


def generic_event(to: str, amount: str, tx_hash: str, asset: str, contract: str | None) -> Any:
    event: dict[str, Any] = {
        "event_id": f"evt-{uuid.uuid4().hex[:10]}",
        "event_type": "deposit",
        "to_address": to,
        "asset": asset,
        "amount": amount,
        "tx_hash": tx_hash,
    }
    if contract is not None:
        event["contract_address"] = contract
    return event


async def run(
    pool: asyncpg.Pool, settings: Settings, oracle: FinalityOracle, alerts: Any = None
) -> LifecycleStats:
    """One pass of the deposit lifecycle (what the `chain_deposits` job runs)."""
    return await process_deposits(
        pool, settings, oracle, alerts or RecordingSink(), database=settings
    )


async def balance(pool: asyncpg.Pool, account_id: UUID) -> Decimal:
    value: Decimal = await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account_id)
    return value


async def pending(pool: asyncpg.Pool, account_id: UUID) -> Decimal:
    async with pool.acquire() as conn:
        return await pending_incoming(conn, account_id)


async def ledger(pool: asyncpg.Pool, account_id: UUID) -> list[tuple[str, str, Decimal]]:
    rows = await pool.fetch(
        "SELECT source_event_id, event_type, amount FROM balance_events"
        " WHERE account_id = $1 ORDER BY id",
        account_id,
    )
    return [(r["source_event_id"], r["event_type"], r["amount"]) for r in rows]


async def deposits(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    return list(await pool.fetch("SELECT * FROM chain_deposits ORDER BY created_at, transfer_id"))
