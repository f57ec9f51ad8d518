"""Payout fixtures: anvil (from the chain fixtures), the `ANVIL` chain registered, a
FRESH random hot-wallet key (never anvil's default accounts) and settings for both."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import asyncpg
import pytest
from eth_account import Account
from pydantic import SecretStr

from payflow.chain.finality import FinalityOracle
from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.holds import place_payout
from payflow.chain.payouts.signer import HotWallet
from payflow.chain.rpc import RpcClient
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account
from payflow_lab.anvil import AnvilNode
from tests.recording_alerts import RecordingSink

CHAIN = "ANVIL"
WEI = 10**18


@pytest.fixture
async def anvil(tmp_path: Any) -> AsyncIterator[AnvilNode]:
    """A fresh node per test (`finalized` two blocks behind latest)."""
    node = AnvilNode(log_path=str(tmp_path / "anvil.log")).start()
    try:
        yield node
    finally:
        await node.aclose()


@pytest.fixture
def hot_key() -> str:
    return "0x" + bytes(Account.create().key).hex()


@pytest.fixture
async def anvil_chain(owner_pool: asyncpg.Pool) -> str:
    await owner_pool.execute(
        "INSERT INTO chains (chain, native_asset, native_decimals) VALUES ($1, 'ETH', 18)"
        " ON CONFLICT DO NOTHING",
        CHAIN,
    )
    return CHAIN


@pytest.fixture
def payout_settings(
    settings: Settings, anvil: AnvilNode, hot_key: str, anvil_chain: str
) -> Settings:
    return settings.model_copy(
        update={
            "payout_chain": anvil_chain,
            "evm_chains": {
                anvil_chain: {"rpc_url": anvil.url, "policy": "finalized", "chain_id": 1}
            },
            "eth_hot_wallet_key": SecretStr(hot_key),
            "payout_stuck_after_s": 3600.0,
        }
    )


@pytest.fixture
async def rpc(anvil: AnvilNode) -> AsyncIterator[RpcClient]:
    async with RpcClient(anvil.url, chain=CHAIN) as client:
        yield client


@pytest.fixture
async def oracle(payout_settings: Settings) -> AsyncIterator[FinalityOracle]:
    """The chain-core finality oracle on anvil (policy `finalized`, no Redis cache)."""
    oracle = FinalityOracle(payout_settings, None, redis_settings=payout_settings)
    try:
        yield oracle
    finally:
        await oracle.aclose()


@pytest.fixture
async def engine(
    pool: asyncpg.Pool,
    payout_settings: Settings,
    rpc: RpcClient,
    hot_key: str,
    oracle: FinalityOracle,
) -> PayoutEngine:
    return PayoutEngine(
        pool,
        payout_settings,
        rpc,
        [HotWallet(SecretStr(hot_key))],
        finality=oracle,
        alerts=RecordingSink(),
        database=payout_settings,
        chains=payout_settings,
    )


async def funded_account(owner_pool: asyncpg.Pool, asset: str, balance: Decimal) -> uuid.UUID:
    async with owner_pool.acquire() as conn:
        account = await create_account(conn, asset, balance)
    return account.id


async def request_payout(
    pool: asyncpg.Pool,
    settings: Settings,
    account_id: uuid.UUID,
    amount: str,
    to_address: str,
    key: str | None = None,
) -> Any:
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await conn.fetchrow("SELECT id, asset FROM accounts WHERE id = $1", account_id)
        row, _ = await place_payout(
            conn,
            settings,
            merchant_id=uuid.UUID(int=1),
            idempotency_key=key or uuid.uuid4().hex,
            account=account,
            amount=Decimal(amount),
            to_address=to_address,
            chain=settings.payout_chain,
            trace_id=None,
        )
    return row


async def settle_all(engine: PayoutEngine, anvil: AnvilNode, rounds: int = 6) -> None:
    """Tick, mine past finality, tick, until nothing is open (bounded)."""
    for _ in range(rounds):
        await engine.tick()
        await anvil.mine(3)
        await engine.tick()
        async with engine.pool.acquire() as conn:
            left = await conn.fetchval(
                "SELECT count(*) FROM payouts WHERE status NOT IN ('confirmed', 'failed')"
            )
        if left == 0:
            return


async def ledger_rows(pool: asyncpg.Pool, account_id: uuid.UUID) -> list[Any]:
    return await pool.fetch(
        "SELECT event_type, amount, source_event_id FROM balance_events WHERE account_id = $1"
        " ORDER BY id",
        account_id,
    )


def fresh_address() -> str:
    return Account.create().address.lower()
