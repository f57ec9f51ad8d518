"""The node is the chain we think it is, and can answer what the policy asks: an RPC of
another network (a real anvil with another chain id) and a node without the `finalized`
tag (a real anvil behind a proxy refusing the tag) stop chain work with one clear line,
an alert and a `payflow status` problem; nothing is credited, walked or signed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import asyncpg
import pytest
from eth_account import Account
from pydantic import SecretStr

from payflow.alerts import Severity
from payflow.alerts.build import build_alert_sink
from payflow.chain.finality import FinalityOracle
from payflow.chain.identity import NODE_PROBLEM, NodeMisconfigured
from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.signer import HotWallet
from payflow.chain.recon import reconcile_chain
from payflow.chain.recon_cli import run_chain_recon
from payflow.chain.rpc import RpcClient
from payflow.chain.watch.cli import scan_once
from payflow.chain.watch.role import run_scanner
from payflow.chain.watch.scanner import Scanner
from payflow.jobs.spec import JobContext, Outcome
from payflow.ops.scheduler import run_job
from payflow.ops.status import collect_status
from payflow_lab.anvil import WEI_PER_ETH, AnvilNode

from .deposit_support import (
    CHAIN,
    RecordingSink,
    balance,
    chain_settings,
    deliver,
    deposits,
    generic_event,
    open_account,
    pending,
    run,
)
from .rpc_proxy import RpcProxy, error

MISMATCH = (
    "chain ETH_MAINNET: the configured RPC answers eth_chainId 137, expected 1 (ETH_CHAIN_ID):"
    " it belongs to another network; chain work stopped"
)


@pytest.fixture
async def polygon(tmp_path: Any) -> AsyncIterator[AnvilNode]:
    """A real node of another network (chain id 137) where ETH_MAINNET's RPC should be."""
    node = AnvilNode(log_path=str(tmp_path / "anvil.log"), chain_id=137).start()
    try:
        yield node
    finally:
        await node.aclose()


async def test_an_rpc_of_another_network_stops_every_chain_path_in_one_line(
    polygon: AnvilNode, pool: asyncpg.Pool, database_url: str, migration_url: str
) -> None:
    settings = chain_settings(database_url, migration_url, polygon.url)
    account, address = await open_account(pool, settings, "ETH")
    tx = await polygon.send_eth(address, WEI_PER_ETH)
    await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
    await polygon.mine(3)

    sink = build_alert_sink(settings, pool, database=settings)
    job = await run_job(JobContext(pool, settings, sink), "chain_deposits")
    assert job is not None and job.result.outcome is Outcome.ALERT
    assert f"STOPPED {MISMATCH}" in job.result.summary
    assert NODE_PROBLEM.labels(CHAIN)._value.get() == 1
    # not credited as ETH_MAINNET ETH: the report waits, "payment detected" only
    assert await deposits(pool) == [] and await balance(pool, account) == 0
    assert await pending(pool, account) == Decimal(1)
    status = await collect_status(pool, settings)
    assert f"chain.node:{CHAIN}: {MISMATCH}" in status.problems
    assert any(p.startswith("chain job chain_deposits: last run alert") for p in status.problems)

    oracle = FinalityOracle(settings, None, redis_settings=settings)
    try:
        with pytest.raises(NodeMisconfigured) as scanned:
            await Scanner(pool, settings, oracle, database=settings).step(CHAIN)
        assert str(scanned.value) == MISMATCH
        assert await pool.fetchval("SELECT count(*) FROM chain_scanner_cursors") == 0
        with pytest.raises(NodeMisconfigured):
            await reconcile_chain(pool, settings, oracle, CHAIN, from_block=0)
    finally:
        await oracle.aclose()
    assert (
        await run_chain_recon(settings, from_block=0, database=settings, redis_settings=settings)
        is False
    )
    assert (
        await scan_once(
            settings, database=settings, redis_settings=settings, observability=settings
        )
        is False
    )
    # the scanner role keeps running, and says so through its alert sink
    recording, stop = RecordingSink(), asyncio.Event()
    oracle = FinalityOracle(settings, None, redis_settings=settings)
    try:
        role = asyncio.create_task(
            run_scanner(pool, settings, oracle, stop, recording, database=settings)
        )
        await asyncio.sleep(1.0)
        stop.set()
        await role
    finally:
        await oracle.aclose()
    assert (f"chain.node:{CHAIN}", Severity.CRITICAL, MISMATCH) in [
        fired[:3] for fired in recording.fired
    ]

    # a payout is never signed for the network the node names
    key = SecretStr("0x" + bytes(Account.create().key).hex())
    async with RpcClient(polygon.url, chain=CHAIN) as rpc:
        engine = PayoutEngine(
            pool, settings, rpc, [HotWallet(key)], database=settings, chains=settings
        )
        with pytest.raises(NodeMisconfigured, match="eth_chainId 137, expected 1"):
            await engine.chain_id()

    # the setting pointed at the node's network: the chains table still says 1
    moved = settings.model_copy(update={"eth_chain_id": 137})
    oracle = FinalityOracle(moved, None, redis_settings=moved)
    try:
        stats = await run(pool, moved, oracle)
    finally:
        await oracle.aclose()
    assert stats.stopped == [
        "chain ETH_MAINNET: ETH_CHAIN_ID is 137 but the chains table records chain id 1:"
        " chain work stopped (point the setting and the RPC at the same network)"
    ]
    assert await balance(pool, account) == 0


async def test_a_node_without_the_finalized_tag_stops_and_suggests_confirmations(
    anvil: AnvilNode, pool: asyncpg.Pool, database_url: str, migration_url: str
) -> None:
    proxy = await RpcProxy(anvil.url).start()

    def no_finalized(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
        if method == "eth_getBlockByNumber" and params and params[0] == "finalized":
            return error(answer, -32602, "invalid block tag: finalized")
        return answer

    proxy.rewrite = no_finalized
    try:
        settings = chain_settings(database_url, migration_url, proxy.url)
        account, address = await open_account(pool, settings, "ETH")
        tx = await anvil.send_eth(address, WEI_PER_ETH)
        await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
        await anvil.mine(3)
        sink = build_alert_sink(settings, pool, database=settings)
        job = await run_job(JobContext(pool, settings, sink), "chain_deposits")
        assert job is not None and job.result.outcome is Outcome.ALERT
        line = (
            "chain ETH_MAINNET: the node does not know the `finalized` block tag (invalid block"
            " tag: finalized), which the policy `finalized` needs: set ETH_CONFIRMATION_POLICY"
            " to confirmations:N (e.g. confirmations:64); deposits wait until then"
        )
        assert job.result.summary.endswith(f"; STOPPED {line}")
        assert await balance(pool, account) == 0  # money-safe: the deposit waits
        status = await collect_status(pool, settings)
        assert f"chain.node:{CHAIN}: {line}" in status.problems

        # the operator follows the line: the same node under confirmations:2 credits it
        fixed = settings.model_copy(update={"eth_confirmation_policy": "confirmations:2"})
        job = await run_job(JobContext(pool, fixed, sink), "chain_deposits")
        assert job is not None and job.result.outcome is Outcome.OK
        await run_job(JobContext(pool, fixed, sink), "chain_deposits")
        assert await balance(pool, account) == Decimal(1)
        status = await collect_status(pool, fixed)
        assert not [p for p in status.problems if p.startswith("chain")]
    finally:
        await proxy.aclose()
