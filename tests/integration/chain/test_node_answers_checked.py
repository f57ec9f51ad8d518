"""The node's `eth_getLogs` answers are checked, not assumed (a real anvil behind a
rewriting JSON-RPC proxy): a lagging replica's empty answer is verified against the
block headers and never walked past, and a provider's range or result limit is adapted
to by splitting, by the scanner and by `recon --chain` alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from payflow.chain.finality import FinalityOracle
from payflow.chain.recon import reconcile_chain
from payflow.chain.rpc import hex_int
from payflow.chain.transfers import transfer_id
from payflow.chain.watch.logs import RECHECKED, LogsTooDense, RangeNotHeld
from payflow.chain.watch.role import run_scanner
from payflow.config import Settings
from payflow_lab.anvil import DEFAULT_ACCOUNTS, AnvilNode
from tests.recording_alerts import RecordingSink

from .rpc_proxy import RpcProxy, error
from .scanning import CHAIN, USDC_ADDRESS, build_world, cursor, scanner_deposits

USDC_25 = 25_000_000  # 25 USDC in base units (6 decimals)


@pytest.fixture
async def proxy(anvil: AnvilNode) -> AsyncIterator[RpcProxy]:
    found = await RpcProxy(anvil.url).start()
    yield found
    await found.aclose()


def _range(params: list[Any]) -> tuple[int, int] | None:
    query = params[0] if params and isinstance(params[0], dict) else {}
    if "fromBlock" not in query:
        return None  # a query by block hash
    first, last = hex_int(query["fromBlock"]), hex_int(query["toBlock"])
    assert first is not None and last is not None
    return first, last


async def test_a_lagging_replica_answering_no_logs_never_hides_a_deposit(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    anvil: AnvilNode,
    proxy: RpcProxy,
) -> None:
    """A load-balanced RPC whose replica has not seen the blocks answers `eth_getLogs`
    with [] for them. The old scanner walked past a 25 USDC deposit for good."""
    world = await build_world(pool, owner_pool, settings, anvil, eth_rpc_url=proxy.url)
    await anvil.token_mint(world.token, DEFAULT_ACCOUNTS[0], 100 * USDC_25)
    first = await anvil.token_transfer(world.token, USDC_ADDRESS, USDC_25)
    await anvil.mine(2)

    # 1. the replica answers every range query with [] (it does hold the range's end
    #    header): the bloom of the deposit's block says "maybe", so it is asked by hash.
    def empty_ranges(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
        if method == "eth_getLogs" and _range(params) is not None:
            return {**answer, "result": []}
        return answer

    proxy.rewrite = empty_ranges
    before = RECHECKED.labels(CHAIN, "found")._value.get()
    await world.scanner.catch_up(CHAIN)
    assert transfer_id(CHAIN, first, 0) in await scanner_deposits(pool)
    assert RECHECKED.labels(CHAIN, "found")._value.get() == before + 1

    # 2. the replica is behind the range's end: [] for the logs AND no header of the
    #    end block in the same batch. The range is not passed; it is read again.
    second = await anvil.token_transfer(world.token, USDC_ADDRESS, USDC_25)
    await anvil.mine(2)
    stuck_at = await cursor(pool)
    lagging = True

    def behind(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
        if not lagging:
            return answer
        if method == "eth_getLogs":
            return (
                {**answer, "result": []}
                if _range(params)
                else error(answer, -32000, "unknown block")
            )
        if method == "eth_getBlockByNumber" and params[1] is False:
            return {**answer, "result": None}
        return answer

    proxy.rewrite = behind
    with pytest.raises(RangeNotHeld):
        await world.scanner.step(CHAIN)
    assert await cursor(pool) == stuck_at
    assert transfer_id(CHAIN, second, 0) not in await scanner_deposits(pool)
    lagging = False  # the replica caught up
    await world.scanner.catch_up(CHAIN)
    found = await scanner_deposits(pool)
    assert int(found[transfer_id(CHAIN, second, 0)]["units"]) == USDC_25
    assert await cursor(pool) != stuck_at
    await world.oracle.aclose()


async def test_provider_log_limits_are_adapted_to_by_the_scanner_and_recon(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    anvil: AnvilNode,
    proxy: RpcProxy,
) -> None:
    """A provider refusing more than 10 blocks per `eth_getLogs`, and more than 1 result:
    the scanner's 50-block batch and recon's 1,000-block span are split until the
    provider answers; the old scanner retried the same range forever."""
    world = await build_world(
        pool, owner_pool, settings, anvil, eth_rpc_url=proxy.url, eth_scanner_batch_blocks=50
    )
    await anvil.token_mint(world.token, DEFAULT_ACCOUNTS[0], 100 * USDC_25)
    await anvil.mine(5)
    one = await anvil.token_transfer(world.token, USDC_ADDRESS, USDC_25)
    await anvil.mine(7)
    two = await anvil.token_transfer(world.token, USDC_ADDRESS, 2 * USDC_25)
    await anvil.mine(30)
    refused = []

    def limited(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
        span = _range(params) if method == "eth_getLogs" else None
        if span is None or "error" in answer:
            return answer
        if span[1] - span[0] + 1 > 10:
            refused.append(span)
            return error(answer, -32005, "query exceeds max block range 10")
        if len(answer.get("result") or []) > 1:
            refused.append(span)
            return error(answer, -32005, "query returned more than 1 results")
        return answer

    proxy.rewrite = limited
    results = await world.scanner.catch_up(CHAIN)
    assert results[-1].caught_up and refused
    found = await scanner_deposits(pool)
    assert {transfer_id(CHAIN, one, 0), transfer_id(CHAIN, two, 0)} <= set(found)
    assert await cursor(pool) == (
        await anvil.head(),
        (await anvil.rpc.get_block("latest") or {})["hash"],
    )

    refused.clear()
    recon_settings = world.settings.model_copy(update={"recon_chain_block_span": 1000})
    oracle = FinalityOracle(recon_settings, None, redis_settings=recon_settings)
    try:
        report = await reconcile_chain(pool, recon_settings, oracle, CHAIN, from_block=0)
    finally:
        await oracle.aclose()
    assert refused  # the 1,000-block span was refused, then split
    assert report.transfers_seen == 2
    assert report.uncredited == sorted([transfer_id(CHAIN, one, 0), transfer_id(CHAIN, two, 0)])

    # One block whose logs alone exceed the result limit cannot be split: said so.
    dense = await anvil.token_batch_transfer(world.token, [(USDC_ADDRESS, 1), (USDC_ADDRESS, 2)])
    await anvil.receipt(dense)  # mined before the scanner looks (a loaded machine is slow)
    with pytest.raises(LogsTooDense, match="alone is over the provider's limit"):
        await world.scanner.catch_up(CHAIN)
    # the role keeps failing on that block while the head moves on: the lag alert fires
    await anvil.mine(5)
    sink, stop = RecordingSink(), asyncio.Event()
    strict = world.settings.model_copy(update={"eth_scanner_max_lag_blocks": 3})
    role = asyncio.create_task(run_scanner(pool, strict, world.oracle, stop, sink, database=strict))
    await asyncio.sleep(1.0)
    stop.set()
    await role
    assert f"chain.scanner_lag:{CHAIN}" in sink.keys()
    await world.oracle.aclose()
