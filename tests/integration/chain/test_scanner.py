"""The scanner on a real node (anvil): native and ERC-20 deposits with their positions,
catching up after an outage, and the reorg walk back to the fork point."""

from __future__ import annotations

import asyncio
import multiprocessing

import asyncpg
import pytest
from structlog.testing import capture_logs

from payflow.chain.finality import FinalityOracle
from payflow.chain.transfers import transfer_id
from payflow.chain.watch.cli import scan_once
from payflow.chain.watch.role import run_scanner
from payflow.chain.watch.scanner import REORGS
from payflow.config import Settings
from payflow_lab.anvil import DEFAULT_ACCOUNTS, WEI_PER_ETH, AnvilNode

from .scan_worker import catch_up_after_barrier
from .scanning import (
    CHAIN,
    ETH_ADDRESS,
    STRANGER,
    USDC_ADDRESS,
    build_world,
    cursor,
    scanner_deposits,
)


async def test_scanner_finds_native_and_token_deposits_with_positions(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings, anvil: AnvilNode
) -> None:
    world = await build_world(pool, owner_pool, settings, anvil)
    lookalike = await anvil.deploy_token("Test USD Coin", "USDC", 6)  # not registered
    sender = DEFAULT_ACCOUNTS[0]
    await anvil.token_mint(world.token, sender, 10_000_000)
    await anvil.token_mint(lookalike, sender, 10_000_000)
    native = await anvil.send_eth(ETH_ADDRESS, 3 * WEI_PER_ETH // 2)
    to_stranger = await anvil.send_eth(STRANGER, WEI_PER_ETH)
    single = await anvil.token_transfer(world.token, USDC_ADDRESS, 1_250_000)
    batch = await anvil.token_batch_transfer(
        world.token, [(USDC_ADDRESS, 1), (STRANGER, 2), (USDC_ADDRESS, 3_000_000)]
    )
    fake = await anvil.token_transfer(lookalike, USDC_ADDRESS, 9_000_000)
    for tx in (native, to_stranger, single, batch, fake):
        assert (await anvil.receipt(tx))["status"] == "0x1"

    results = await world.scanner.catch_up(CHAIN)

    assert results[-1].caught_up
    found = await scanner_deposits(pool)
    expected = {
        transfer_id(CHAIN, native, -1): (ETH_ADDRESS, None, 3 * WEI_PER_ETH // 2),
        transfer_id(CHAIN, single, 0): (USDC_ADDRESS, world.token, 1_250_000),
        transfer_id(CHAIN, batch, 0): (USDC_ADDRESS, world.token, 1),
        transfer_id(CHAIN, batch, 2): (USDC_ADDRESS, world.token, 3_000_000),
    }
    assert {tid: (r["to_address"], r["contract"], int(r["units"])) for tid, r in found.items()} == (
        expected
    )
    for row in found.values():
        block = await anvil.rpc.get_block(row["block_number"])
        assert block is not None and block["hash"] == row["block_hash"]
        assert row["status"] == "verified"
    assert await cursor(pool) == (
        await anvil.head(),
        (await anvil.rpc.get_block("latest") or {})["hash"],
    )
    # A second pass reports nothing new: the scanner's reports are idempotent.
    reports = await pool.fetchval("SELECT count(*) FROM chain_deposit_reports")
    await pool.execute(
        "UPDATE chain_scanner_cursors SET block_number = 0, block_hash = $1",
        (await anvil.rpc.get_block(0) or {})["hash"],
    )
    await world.scanner.catch_up(CHAIN)
    assert await pool.fetchval("SELECT count(*) FROM chain_deposit_reports") == reports
    assert len(await scanner_deposits(pool)) == 4
    await world.oracle.aclose()


async def test_scanner_stopped_for_50_blocks_catches_up_with_nothing_missed(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings, anvil: AnvilNode
) -> None:
    world = await build_world(pool, owner_pool, settings, anvil, eth_scanner_batch_blocks=7)
    await world.scanner.catch_up(CHAIN)
    stopped_at, _ = await cursor(pool)
    sent = []
    for i in range(10):  # the scanner is not running: 50 blocks with a deposit every 5
        sent.append(await anvil.send_eth(ETH_ADDRESS, WEI_PER_ETH + i))
        await anvil.mine(4)
    head = await anvil.head()
    assert head - stopped_at == 50

    results = await world.scanner.catch_up(CHAIN)

    assert sum(r.walked for r in results) == 50
    assert await cursor(pool) == (head, (await anvil.rpc.get_block(head) or {})["hash"])
    found = await scanner_deposits(pool)
    assert set(found) == {transfer_id(CHAIN, tx, -1) for tx in sent}
    assert sorted(int(r["units"]) for r in found.values()) == [WEI_PER_ETH + i for i in range(10)]
    await world.oracle.aclose()


async def test_reorg_is_detected_and_walked_back_to_the_fork_point(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings, anvil: AnvilNode
) -> None:
    world = await build_world(pool, owner_pool, settings, anvil)
    await anvil.mine(5)
    dropped = await anvil.send_eth(ETH_ADDRESS, 7 * WEI_PER_ETH)
    await world.scanner.catch_up(CHAIN)
    before = await scanner_deposits(pool)
    assert set(before) == {transfer_id(CHAIN, dropped, -1)}
    head = await anvil.head()
    old_hashes = {
        n: (await anvil.rpc.get_block(n) or {})["hash"] for n in range(head - 2, head + 1)
    }
    reorgs = REORGS.labels(CHAIN)._value.get()

    # Replace the last 2 blocks (finalized is head - 2): the deposit's block is gone and
    # another transfer to our address sits in the new branch.
    replacement = {"from": DEFAULT_ACCOUNTS[1], "to": ETH_ADDRESS, "value": hex(WEI_PER_ETH)}
    await anvil.reorg(2, [(replacement, 1)])
    assert (await anvil.rpc.get_block(head) or {})["hash"] != old_hashes[head]
    assert (await anvil.rpc.get_block(head - 2) or {})["hash"] == old_hashes[head - 2]

    walked = await world.scanner.step(CHAIN)

    assert walked.reorg_depth == 2
    assert await cursor(pool) == (head - 2, old_hashes[head - 2])
    assert REORGS.labels(CHAIN)._value.get() == reorgs + 1
    await world.scanner.catch_up(CHAIN)
    assert await cursor(pool) == (head, (await anvil.rpc.get_block(head) or {})["hash"])
    kept = await pool.fetch(
        "SELECT block_number, block_hash FROM chain_scanner_blocks WHERE block_number > $1",
        head - 2,
    )
    for row in kept:  # the walked hashes are the new branch's
        assert (await anvil.rpc.get_block(row["block_number"]) or {})["hash"] == row["block_hash"]
    found = await scanner_deposits(pool)
    new = [r for tid, r in found.items() if tid != transfer_id(CHAIN, dropped, -1)]
    assert len(new) == 1 and int(new[0]["units"]) == WEI_PER_ETH
    assert new[0]["block_hash"] == (await anvil.rpc.get_block(new[0]["block_number"]) or {})["hash"]
    await world.oracle.aclose()


async def test_scanner_role_waits_through_a_node_outage_and_misses_nothing(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings, anvil: AnvilNode
) -> None:
    world = await build_world(
        pool,
        owner_pool,
        settings,
        anvil,
        eth_scanner_poll_interval_s=0.05,
        rpc_timeout_s=0.3,
        chain_breaker_failures=2,
        chain_breaker_open_s=0.2,
    )
    oracle = FinalityOracle(world.settings, None, redis_settings=world.settings)
    stop = asyncio.Event()
    role = asyncio.create_task(
        run_scanner(pool, world.settings, oracle, stop, database=world.settings)
    )
    try:
        before = await anvil.send_eth(ETH_ADDRESS, WEI_PER_ETH)
        await _until(pool, {transfer_id(CHAIN, before, -1)})
        with capture_logs() as logs:
            anvil.pause()  # the node stops answering: timeouts, then the breaker opens
            await asyncio.sleep(1.0)
        assert not role.done()
        waited = [e for e in logs if e["event"] == "payflow.scanner.waiting"]
        assert waited and {e["error_type"] for e in waited} <= {
            "RpcUnavailable",
            "ChainUnavailable",
        }
        anvil.resume()
        during = [await anvil.send_eth(ETH_ADDRESS, WEI_PER_ETH + i) for i in range(3)]
        await _until(pool, {transfer_id(CHAIN, tx, -1) for tx in [before, *during]})
        assert not role.done()
    finally:
        anvil.resume()
        stop.set()
        await role
        await oracle.aclose()
        await world.oracle.aclose()


async def _until(pool: asyncpg.Pool, expected: set[str], timeout_s: float = 20.0) -> None:
    """Wait (bounded) until the scanner reported exactly `expected`."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while set(await scanner_deposits(pool)) != expected:
        assert asyncio.get_running_loop().time() < deadline, await scanner_deposits(pool)
        await asyncio.sleep(0.05)


@pytest.mark.slow
async def test_two_replicas_in_two_processes_report_each_transfer_once(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings, anvil: AnvilNode
) -> None:
    world = await build_world(pool, owner_pool, settings, anvil)
    await anvil.token_mint(world.token, DEFAULT_ACCOUNTS[0], 10**9)
    sent = []
    for i in range(8):
        sent.append(await anvil.send_eth(ETH_ADDRESS, WEI_PER_ETH + i))
        sent.append(await anvil.token_transfer(world.token, USDC_ADDRESS, 1_000 + i))
        await anvil.mine(3)
    head = await anvil.head()
    overrides = {
        "database_url": world.settings.database_url,
        "eth_rpc_url": anvil.url,
        "eth_scanner_lag_blocks": 0,
        "eth_scanner_start_block": 0,
        "eth_scanner_batch_blocks": 4,
        "redis_key_prefix": world.settings.redis_key_prefix,
    }
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(2)
        with context.Pool(2) as processes:
            results = await asyncio.to_thread(
                processes.map, catch_up_after_barrier, [(overrides, barrier)] * 2
            )

    assert sum(walked for walked, _ in results) >= head  # each block committed by one
    assert await cursor(pool) == (head, (await anvil.rpc.get_block(head) or {})["hash"])
    found = await scanner_deposits(pool)
    assert set(found) == {
        transfer_id(CHAIN, tx, -1 if i % 2 == 0 else 0) for i, tx in enumerate(sent)
    }
    reports = await pool.fetch(
        "SELECT transfer_id, count(*) AS n FROM chain_deposit_reports"
        " WHERE source = 'scanner' GROUP BY transfer_id"
    )
    assert {r["transfer_id"] for r in reports} == set(found)
    assert {r["n"] for r in reports} == {1}
    kept = await pool.fetch("SELECT block_number, block_hash FROM chain_scanner_blocks")
    for row in kept:
        assert (await anvil.rpc.get_block(row["block_number"]) or {})["hash"] == row["block_hash"]
    await world.oracle.aclose()


async def test_scanner_once_catches_up_and_exits(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    anvil: AnvilNode,
    capsys: pytest.CaptureFixture[str],
) -> None:
    world = await build_world(pool, owner_pool, settings, anvil)
    tx = await anvil.send_eth(ETH_ADDRESS, WEI_PER_ETH)
    assert await scan_once(
        world.settings,
        database=world.settings,
        redis_settings=world.settings,
        observability=world.settings,
    )
    assert set(await scanner_deposits(pool)) == {transfer_id(CHAIN, tx, -1)}
    head = await anvil.head()
    assert f"ETH_MAINNET: cursor={head} head={head}" in capsys.readouterr().out
    assert not await scan_once(
        settings, database=settings, redis_settings=settings, observability=settings
    )  # no chain configured: exit 1
    await world.oracle.aclose()
