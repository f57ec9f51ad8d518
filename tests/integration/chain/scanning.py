"""Set-up shared by the scanner tests: a merchant with ETH and USDC accounts, deposit
addresses on them, a registered 6-decimal token, and a scanner on the test's anvil."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

import asyncpg

from payflow.api.auth import create_merchant
from payflow.chain.finality import FinalityOracle
from payflow.chain.watch.scanner import Scanner
from payflow.config import Settings
from payflow_lab.anvil import DEFAULT_ACCOUNTS, AnvilNode

CHAIN = "ETH_MAINNET"
ETH_ADDRESS = DEFAULT_ACCOUNTS[5]
USDC_ADDRESS = DEFAULT_ACCOUNTS[6]
STRANGER = DEFAULT_ACCOUNTS[7]  # not ours


@dataclass
class World:
    settings: Settings
    oracle: FinalityOracle
    scanner: Scanner
    eth_account: UUID
    usdc_account: UUID
    token: str


def chain_settings(settings: Settings, anvil: AnvilNode, **extra: object) -> Settings:
    values: dict[str, object] = {
        "eth_rpc_url": anvil.url,
        "eth_scanner_lag_blocks": 0,
        "eth_scanner_start_block": 0,
        "eth_scanner_batch_blocks": 20,
        "chain_breaker_failures": 1000,
    }
    values.update(extra)
    return settings.model_copy(update=values)


async def build_world(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    anvil: AnvilNode,
    **extra: object,
) -> World:
    chain = chain_settings(settings, anvil, **extra)
    token = await anvil.deploy_token("Test USD Coin", "USDC", 6)
    async with owner_pool.acquire() as conn:
        merchant, _key, _secret = await create_merchant(conn, "scan", admin=False)
        eth = await conn.fetchval(
            "INSERT INTO accounts (merchant_id, asset) VALUES ($1, 'ETH') RETURNING id", merchant
        )
        usdc = await conn.fetchval(
            "INSERT INTO accounts (merchant_id, asset) VALUES ($1, 'USDC') RETURNING id",
            merchant,
        )
        await conn.execute(
            "INSERT INTO deposit_addresses (chain, address, account_id) VALUES ($1, $2, $3),"
            " ($1, $4, $5)",
            CHAIN,
            ETH_ADDRESS,
            eth,
            USDC_ADDRESS,
            usdc,
        )
        await conn.execute(
            "INSERT INTO chain_tokens (chain, contract, asset, decimals)"
            " VALUES ($1, $2, 'USDC', 6)",
            CHAIN,
            token,
        )
    oracle = FinalityOracle(chain, None, redis_settings=chain)
    return World(chain, oracle, Scanner(pool, chain, oracle, database=chain), eth, usdc, token)


async def scanner_deposits(pool: asyncpg.Pool) -> dict[str, asyncpg.Record]:
    """transfer id -> deposit row, for deposits the scanner reported."""
    rows = await pool.fetch(
        "SELECT transfer_id, tx_hash, position, to_address, contract, units, block_number,"
        " block_hash, status, sources FROM chain_deposits WHERE 'scanner' = ANY (sources)"
    )
    return {row["transfer_id"]: row for row in rows}


async def cursor(pool: asyncpg.Pool) -> tuple[int, str]:
    row = await pool.fetchrow(
        "SELECT block_number, block_hash FROM chain_scanner_cursors WHERE chain = $1", CHAIN
    )
    assert row is not None
    return row["block_number"], row["block_hash"]
