"""The token registry: registration rules, `payflow tokens` and migration 0005 going
down and up over a database with data in it (real PostgreSQL)."""

from __future__ import annotations

import asyncio
import os
import subprocess

import asyncpg
import pytest

from payflow.chain.identity import NodeMisconfigured, expected_chain_id
from payflow.config import Settings
from payflow.db import migrate
from payflow.db.tx import transaction
from payflow.errors import BadInput, Conflict
from payflow.ingress.registry import add_chain, add_token, list_tokens
from tests.conftest import OWNER_ROLE
from tests.processes import PAYFLOW_MAIN, run_payflow

CLI = PAYFLOW_MAIN
SEEDED = [
    ("ETH_MAINNET", None, "ETH", 18),
    ("ETH_MAINNET", "0x2260fac5e5542a773aa44fbcfedf7c193bc2c599", "WBTC", 8),
    ("ETH_MAINNET", "0x6b175474e89094c44da98b954eedeac495271d0f", "DAI", 18),
    ("ETH_MAINNET", "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "USDC", 6),
    ("ETH_MAINNET", "0xdac17f958d2ee523a2206206994597c13d831ec7", "USDT", 6),
]
NEW_CONTRACT = "0x" + "Ab" * 20


async def _registry(pool: asyncpg.Pool) -> list[tuple[str, str | None, str, int]]:
    async with pool.acquire() as conn:
        return [(r.chain, r.contract, r.asset, r.decimals) for r in await list_tokens(conn)]


async def test_seeded_registry(pool: asyncpg.Pool) -> None:
    assert await _registry(pool) == SEEDED


async def test_add_token_is_validated_and_idempotent(
    owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    async with owner_pool.acquire() as conn, transaction(conn, settings):
        row = await add_token(conn, "ETH_MAINNET", NEW_CONTRACT, "USDC", 6)
        assert (row.contract, row.created) == (NEW_CONTRACT.lower(), True)
        again = await add_token(conn, "ETH_MAINNET", NEW_CONTRACT.lower(), "USDC", 6)
        assert again.created is False
    cases: list[tuple[tuple[str, str, str, int], type[Exception], str]] = [
        (("ETH_MAINNET", "0x12", "USDC", 6), BadInput, "contract"),
        (("ETH_MAINNET", "0x" + "cd" * 20, "NOPE", 6), BadInput, "unknown asset"),
        (("ETH_MAINNET", "0x" + "cd" * 20, "USDC", 18), BadInput, "scale 6"),
        (("ETH_MAINNET", "0x" + "cd" * 20, "USDC", -1), BadInput, "between 0"),
        (("POLYGON", "0x" + "cd" * 20, "USDC", 6), BadInput, "not registered"),
        (("ETH_MAINNET", NEW_CONTRACT, "USDT", 6), Conflict, "registered as USDC"),
        (("ETH_MAINNET", NEW_CONTRACT, "USDC", 4), Conflict, "registered as USDC"),
    ]
    for args, error, message in cases:
        async with owner_pool.acquire() as conn, transaction(conn, settings):
            with pytest.raises(error, match=message):
                await add_token(conn, *args)
    assert len(await _registry(owner_pool)) == len(SEEDED) + 1


async def test_more_chains_are_data(owner_pool: asyncpg.Pool, settings: Settings) -> None:
    async with owner_pool.acquire() as conn, transaction(conn, settings):
        await add_chain(conn, "BASE_MAINNET", "ETH", 18)
        await add_token(
            conn, "BASE_MAINNET", "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913", "USDC", 6
        )
        with pytest.raises(Conflict):
            await add_chain(conn, "BASE_MAINNET", "ETH", 9)
        with pytest.raises(BadInput):
            await add_chain(conn, "base", "ETH", 18)
        # the network's chain id: recorded once, the same again is idempotent
        await add_chain(conn, "BASE_MAINNET", "ETH", 18, 8453)
        await add_chain(conn, "BASE_MAINNET", "ETH", 18, 8453)
        with pytest.raises(Conflict, match="registered with chain id 8453"):
            await add_chain(conn, "BASE_MAINNET", "ETH", 18, 1)
    stored = await owner_pool.fetchval("SELECT chain_id FROM chains WHERE chain = 'BASE_MAINNET'")
    assert stored == 8453
    # a setting naming another network than the table stops the chain, in one line
    other = settings.model_copy(
        update={"evm_chains": {"BASE_MAINNET": {"rpc_url": "http://127.0.0.1:1", "chain_id": 1}}}
    )
    with pytest.raises(NodeMisconfigured) as stopped:
        await expected_chain_id(owner_pool, other, "BASE_MAINNET")
    assert str(stopped.value).startswith(
        "chain BASE_MAINNET: EVM_CHAINS.BASE_MAINNET.chain_id is 1 but the chains table"
        " records chain id 8453"
    )
    registry = await _registry(owner_pool)
    assert ("BASE_MAINNET", None, "ETH", 18) in registry
    assert ("BASE_MAINNET", "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913", "USDC", 6) in registry


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DATABASE_URL": settings.database_url,
        "MIGRATION_DATABASE_URL": settings.migration_url(),
        "LOG_LEVEL": "WARNING",
    }
    return run_payflow(["tokens", *args], env, command=CLI)


async def test_tokens_cli_adds_lists_and_refuses_clearly(settings: Settings) -> None:
    added = await asyncio.to_thread(_cli, settings, "add", "ETH_MAINNET", NEW_CONTRACT, "DAI", "18")
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == f"ETH_MAINNET\t{NEW_CONTRACT.lower()}\tDAI\t18"
    assert "registered" in added.stderr
    listed = await asyncio.to_thread(_cli, settings, "list", "--chain", "ETH_MAINNET")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.strip().splitlines()
    assert lines[0] == "ETH_MAINNET\tnative\tETH\t18"
    assert f"ETH_MAINNET\t{NEW_CONTRACT.lower()}\tDAI\t18" in lines and len(lines) == 6
    for args, message in [
        (("add", "ETH_MAINNET", "0xnope", "DAI", "18"), "contract"),
        (("add", "ETH_MAINNET", "0x" + "cd" * 20, "XYZ", "2"), "unknown asset"),
        (("add", "ETH_MAINNET", "0x" + "cd" * 20, "USDC", "8"), "scale"),
        (("add", "ETH_MAINNET", NEW_CONTRACT, "USDC", "6"), "registered as DAI"),
    ]:
        refused = await asyncio.to_thread(_cli, settings, *args)
        assert refused.returncode == 1, refused
        assert message in refused.stderr and "Traceback" not in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1


async def _execute(url: str, *statements: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def _fetch(url: str, sql: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return list(await conn.fetch(sql))
    finally:
        await conn.close()


@pytest.mark.slow
async def test_migration_0005_walks_down_and_up_over_data(migration_url: str) -> None:
    database_url = migration_url  # the schema changes as the migration login, as the owner
    old_row = (
        "INSERT INTO unmatched_provider_events (event_id, reason, chain, payload)"
        " VALUES ('gen:lost', 'unknown_address', 'ETH_MAINNET', '{}')"
    )
    await _execute(database_url, old_row)
    # Only rows the old schema can hold: the downgrade keeps them and runs.
    await asyncio.to_thread(migrate.downgrade, database_url, "0004_pipeline", owner_role=OWNER_ROLE)
    tables = {r["tablename"] for r in await _fetch(database_url, "SELECT tablename FROM pg_tables")}
    assert not {"chains", "chain_tokens", "provider_deliveries"} & tables
    await asyncio.to_thread(migrate.upgrade, database_url, owner_role=OWNER_ROLE)
    kept = await _fetch(database_url, "SELECT event_id, reason FROM unmatched_provider_events")
    assert [(r["event_id"], r["reason"]) for r in kept] == [("gen:lost", "unknown_address")]
    assert len(await _fetch(database_url, "SELECT 1 FROM chain_tokens")) == 4

    # Data only the new schema holds: refused unless forced.
    await _execute(
        database_url,
        "INSERT INTO provider_deliveries (body_sha256, body) VALUES (sha256('x'), 'x')",
        "INSERT INTO unmatched_provider_events (event_id, reason, chain, payload,"
        " delivery_sha256, position) VALUES ('alchemy:nft', 'nft', 'ETH_MAINNET', 'null',"
        " sha256('x'), 0)",
        f"INSERT INTO chain_tokens VALUES ('ETH_MAINNET', '{NEW_CONTRACT.lower()}', 'DAI', 18)",
    )
    with pytest.raises(RuntimeError, match="downgrade refused"):
        await asyncio.to_thread(
            migrate.downgrade, database_url, "0004_pipeline", owner_role=OWNER_ROLE
        )
    assert len(await _fetch(database_url, "SELECT 1 FROM chain_tokens")) == 5
    await asyncio.to_thread(migrate.downgrade, database_url, "0004_pipeline", force=True)
    await asyncio.to_thread(migrate.upgrade, database_url, owner_role=OWNER_ROLE)
    kept = await _fetch(database_url, "SELECT event_id FROM unmatched_provider_events")
    assert [r["event_id"] for r in kept] == ["gen:lost"]
    assert len(await _fetch(database_url, "SELECT 1 FROM chain_tokens")) == 4
