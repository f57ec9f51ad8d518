"""A node that answers wrongly, on a real anvil behind the rewriting proxy: `eth_getLogs`
answers flagged `removed`, logs the query did not ask for, an amount the receipt does
not hold, a provider throttling us, an `eth_chainId` that is no chain id or changes
after start, and a replica that holds a receipt but not its block's header."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import asyncpg
import pytest
from eth_account import Account
from pydantic import SecretStr

from payflow.chain.finality import FinalityOracle
from payflow.chain.identity import NodeMisconfigured, check_node
from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.signer import HotWallet
from payflow.chain.rpc import RpcClient, hex_int
from payflow.chain.transfers import transfer_id
from payflow.chain.watch.blocks import RangeMoved
from payflow.chain.watch.logs import SPLITS, ProviderThrottled
from payflow.chain.watch.scanner import REORGS
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ingress.service import assign_address
from payflow.ledger.accounts import create_account
from payflow_lab.anvil import DEFAULT_ACCOUNTS, WEI_PER_ETH, AnvilNode

from .deposit_support import (
    balance,
    deliver,
    generic_event,
    ledger,
    new_address,
    open_account,
    run,
)
from .deposit_support import chain_settings as lifecycle_settings
from .rpc_proxy import RpcProxy, error
from .scanning import CHAIN, ETH_ADDRESS, USDC_ADDRESS, build_world, cursor, scanner_deposits

USDC_25 = 25_000_000


@pytest.fixture
async def proxy(anvil: AnvilNode) -> AsyncIterator[RpcProxy]:
    found = await RpcProxy(anvil.url).start()
    yield found
    await found.aclose()


@pytest.fixture
async def polygon(tmp_path: Any) -> AsyncIterator[AnvilNode]:
    node = AnvilNode(log_path=str(tmp_path / "polygon.log"), chain_id=137).start()
    try:
        yield node
    finally:
        await node.aclose()


def _is_range_query(method: str, params: list[Any]) -> bool:
    return method == "eth_getLogs" and bool(params) and "fromBlock" in params[0]


async def test_logs_flagged_removed_for_a_block_the_range_holds_are_read_again(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    anvil: AnvilNode,
    proxy: RpcProxy,
) -> None:
    """A node mid-reorg answers the deposit's log with `removed: true` while the header
    it gave for that block is the canonical one. The old scanner dropped the log and
    walked past a 25 USDC deposit for good."""
    world = await build_world(pool, owner_pool, settings, anvil, eth_rpc_url=proxy.url)
    await anvil.token_mint(world.token, DEFAULT_ACCOUNTS[0], 10 * USDC_25)
    tx = await anvil.token_transfer(world.token, USDC_ADDRESS, USDC_25)
    await anvil.mine(2)
    flagging = True

    def removed(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
        if flagging and method == "eth_getLogs" and isinstance(answer.get("result"), list):
            return {**answer, "result": [{**log, "removed": True} for log in answer["result"]]}
        return answer

    proxy.rewrite = removed
    before = (
        await cursor(pool)
        if await pool.fetchval("SELECT count(*) FROM chain_scanner_cursors")
        else None
    )
    with pytest.raises(RangeMoved, match="removed"):
        await world.scanner.catch_up(CHAIN)
    receipt = await anvil.receipt(tx)
    assert before is None or (await cursor(pool))[0] < hex_int(receipt["blockNumber"])
    assert transfer_id(CHAIN, tx, 0) not in await scanner_deposits(pool)
    flagging = False
    await world.scanner.catch_up(CHAIN)
    found = await scanner_deposits(pool)
    assert int(found[transfer_id(CHAIN, tx, 0)]["units"]) == USDC_25
    await world.oracle.aclose()


async def test_logs_not_asked_for_are_dropped_and_an_amount_the_receipt_lacks_never_counts(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    anvil: AnvilNode,
    proxy: RpcProxy,
) -> None:
    """1. The node adds to every range answer a log of a block outside the range asked
    (the first deposit's): the old scanner raised RangeMoved on it forever and never got
    past. 2. The node inflates the deposit log's amount a thousandfold: the old scanner recorded
    25,000 USDC from that answer alone; now the receipt must say the same."""
    world = await build_world(pool, owner_pool, settings, anvil, eth_rpc_url=proxy.url)
    await anvil.token_mint(world.token, DEFAULT_ACCOUNTS[0], 10_000 * USDC_25)
    first = await anvil.token_transfer(world.token, USDC_ADDRESS, USDC_25)
    await anvil.mine(2)
    await world.scanner.catch_up(CHAIN)
    [old_log] = await anvil.rpc.get_logs(
        0,
        await anvil.head(),
        address=[world.token.lower()],
        topics=[None, None, "0x" + "0" * 24 + USDC_ADDRESS[2:]],
    )
    assert old_log["transactionHash"] == first

    second = await anvil.token_transfer(world.token, USDC_ADDRESS, 2 * USDC_25)
    await anvil.mine(2)

    def stale(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
        if _is_range_query(method, params) and isinstance(answer.get("result"), list):
            return {**answer, "result": [old_log, *answer["result"]]}
        return answer

    proxy.rewrite = stale
    await world.scanner.catch_up(CHAIN)
    found = await scanner_deposits(pool)
    assert int(found[transfer_id(CHAIN, second, 0)]["units"]) == 2 * USDC_25
    assert await cursor(pool) == (
        await anvil.head(),
        (await anvil.rpc.get_block("latest") or {})["hash"],
    )

    third = await anvil.token_transfer(world.token, USDC_ADDRESS, 3 * USDC_25)
    await anvil.mine(2)
    lying = True

    def inflated(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
        if lying and method == "eth_getLogs" and isinstance(answer.get("result"), list):
            forged = [
                {**log, "data": "0x" + format(int(log["data"], 16) * 1000, "064x")}
                for log in answer["result"]
            ]
            return {**answer, "result": forged}
        return answer

    proxy.rewrite = inflated
    with pytest.raises(RangeMoved, match="disagrees with its receipt"):
        await world.scanner.catch_up(CHAIN)
    assert transfer_id(CHAIN, third, 0) not in await scanner_deposits(pool)
    lying = False
    await world.scanner.catch_up(CHAIN)
    found = await scanner_deposits(pool)
    assert int(found[transfer_id(CHAIN, third, 0)]["units"]) == 3 * USDC_25
    await world.oracle.aclose()


# Real providers' refusals of an eth_getLogs size (range or result count).
SIZE_REFUSALS = [
    (-32005, "query returned more than 10000 results"),  # Infura, geth
    (-32602, "range 1000000 exceeds limit of 10000"),  # Infura's live block-range limit
    (
        -32602,
        "Log response size exceeded. You can make eth_getLogs requests with up to a 2K"
        " block range and no limit on the response size",
    ),  # Alchemy
    (-32614, "eth_getLogs is limited to a 10,000 range"),  # QuickNode
    (-32600, "block range is too wide"),  # Ankr
    (-32000, "exceed maximum block range: 50000"),
    (-32600, "block range too high"),
    (-32602, "query exceeds max block range 5000"),  # reth
    (
        -32000,
        "block range is larger than max block range, block range = 5120, max block range = 5000",
    ),
    (
        -32600,
        "You can make eth_getLogs requests with up to a 500 block range. Based on your"
        " parameters, this block range should work: [0x1a30dfd, 0x1a30ff0]",
    ),  # Alchemy
    (-32005, "block range too large, max range: 10"),  # cdk-erigon
]
# Real providers throttling the caller, in a JSON-RPC error of an HTTP 200 answer.
THROTTLES = [
    (-32005, "project ID request rate exceeded"),  # Infura
    (-32012, "credits limited to 6000/sec"),  # QuickNode
    (429, "Your app has exceeded its compute units per second capacity."),  # Alchemy
]


async def test_every_providers_size_refusal_splits_and_a_rate_limit_is_waited_out(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    anvil: AnvilNode,
    proxy: RpcProxy,
) -> None:
    """Each real wording of a size refusal splits the range; a throttle (Infura's -32005
    "request rate exceeded", QuickNode's credits) is not a size limit: the old scanner
    split on it down to one block, raised LogsTooDense and kept a 1-block span for good."""
    world = await build_world(
        pool, owner_pool, settings, anvil, eth_rpc_url=proxy.url, eth_scanner_batch_blocks=50
    )
    await anvil.token_mint(world.token, DEFAULT_ACCOUNTS[0], 10 * USDC_25)
    await anvil.mine(8)
    one = await anvil.token_transfer(world.token, USDC_ADDRESS, USDC_25)
    await anvil.mine(30)
    used: list[str] = []

    def sized(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
        if not _is_range_query(method, params):
            return answer
        first, last = hex_int(params[0]["fromBlock"]), hex_int(params[0]["toBlock"])
        assert first is not None and last is not None
        if last - first + 1 > 4:
            code, message = SIZE_REFUSALS[len(used) % len(SIZE_REFUSALS)]
            used.append(message)
            return error(answer, code, message)
        return answer

    proxy.rewrite = sized
    await world.scanner.catch_up(CHAIN)
    assert transfer_id(CHAIN, one, 0) in await scanner_deposits(pool)
    assert len(set(used)) == len(SIZE_REFUSALS)

    # throttled: waited out, never split, the remembered span untouched
    two = await anvil.token_transfer(world.token, USDC_ADDRESS, 2 * USDC_25)
    await anvil.mine(3)
    span = world.scanner._spans[CHAIN].blocks
    splits = SPLITS.labels(CHAIN)._value.get()
    for code, message in THROTTLES:

        def throttled(
            method: str,
            params: list[Any],
            answer: dict[str, Any],
            code: int = code,
            text: str = message,
        ) -> dict[str, Any]:
            return error(answer, code, text) if method == "eth_getLogs" else answer

        proxy.rewrite = throttled
        with pytest.raises(ProviderThrottled):
            await world.scanner.catch_up(CHAIN)
        assert SPLITS.labels(CHAIN)._value.get() == splits
        assert world.scanner._spans[CHAIN].blocks == span
    assert transfer_id(CHAIN, two, 0) not in await scanner_deposits(pool)
    proxy.rewrite = sized
    await world.scanner.catch_up(CHAIN)
    assert transfer_id(CHAIN, two, 0) in await scanner_deposits(pool)
    await world.oracle.aclose()


@pytest.mark.parametrize(
    ("result", "shown"),
    [
        (None, "eth_chainId with null, not a hex chain id"),
        (1, "eth_chainId with 1, not a hex chain id"),  # a JSON number, not a quantity
        ("0xZZ", "eth_chainId with '0xZZ', not a hex chain id"),
        ("0x1_0", "eth_chainId with '0x1_0', not a hex chain id"),
        ("0x" + "f" * 4000, "eth_chainId 0xffffffffffffffffff… (16000 bits), expected 1"),
    ],
)
async def test_an_eth_chain_id_that_is_no_chain_id_stops_in_one_short_line(
    pool: asyncpg.Pool,
    database_url: str,
    migration_url: str,
    proxy: RpcProxy,
    result: Any,
    shown: str,
) -> None:
    """Old lines: null was "answers eth_chainId 0", a JSON number "something not a
    number", '0x1_0' was read as 16, and a 4,000-digit hex id crashed the check with a
    ValueError (its decimal is over Python's 4,300 digits) instead of stopping the chain;
    the payout engine raised ValueError (not NodeMisconfigured) on garbage."""
    settings = lifecycle_settings(database_url, migration_url, proxy.url)

    def chain_id(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
        return {**answer, "result": result} if method == "eth_chainId" else answer

    proxy.rewrite = chain_id
    oracle = FinalityOracle(settings, None, redis_settings=settings)
    try:
        with pytest.raises(NodeMisconfigured) as raised:
            await check_node(pool, oracle, CHAIN, force=True)
    finally:
        await oracle.aclose()
    line = str(raised.value)
    assert shown in line and "\n" not in line and len(line) < 240, line
    key = SecretStr("0x" + bytes(Account.create().key).hex())
    async with RpcClient(proxy.url, chain=CHAIN) as rpc:
        engine = PayoutEngine(
            pool, settings, rpc, [HotWallet(key)], database=settings, chains=settings
        )
        with pytest.raises(NodeMisconfigured, match="eth_chainId"):
            await engine.chain_id()


async def test_an_rpc_swapped_to_another_network_after_start_is_caught_at_once(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    anvil: AnvilNode,
    polygon: AnvilNode,
    proxy: RpcProxy,
    database_url: str,
    migration_url: str,
) -> None:
    """The RPC URL's endpoint is swapped (a load balancer) to a chain-137 node after the
    checks passed. Old: the payout engine kept signing with the chain id it asked once;
    the scanner (check cached for CHAIN_IDENTITY_RECHECK_S) walked back onto the other
    network and recorded its 1 "ETH" as a deposit; the deposit job (cached too) went on."""
    world = await build_world(pool, owner_pool, settings, anvil, eth_rpc_url=proxy.url)
    await anvil.mine(3)
    await world.scanner.catch_up(CHAIN)
    before = await cursor(pool)
    payouts = lifecycle_settings(database_url, migration_url, proxy.url)
    key = SecretStr("0x" + bytes(Account.create().key).hex())
    jobs = FinalityOracle(world.settings, None, redis_settings=world.settings)
    async with RpcClient(proxy.url, chain=CHAIN) as rpc:
        engine = PayoutEngine(
            pool, payouts, rpc, [HotWallet(key)], database=payouts, chains=payouts
        )
        assert await engine.chain_id() == 1
        assert (await run(pool, world.settings, jobs)).stopped == []

        proxy.upstream = polygon.url  # swapped behind the URL
        tx = await polygon.send_eth(ETH_ADDRESS, WEI_PER_ETH)
        await polygon.mine(before[0] + 10)
        with pytest.raises(NodeMisconfigured, match="eth_chainId 137, expected 1"):
            await engine.chain_id()
        with pytest.raises(NodeMisconfigured, match="eth_chainId 137, expected 1"):
            await world.scanner.catch_up(CHAIN)
        stats = await run(pool, world.settings, jobs)
        assert stats.stopped and "eth_chainId 137" in stats.stopped[0]
    await jobs.aclose()
    assert await cursor(pool) == before
    assert transfer_id(CHAIN, tx, -1) not in await scanner_deposits(pool)
    assert await pool.fetchval("SELECT count(*) FROM chain_deposits") == 0
    await world.oracle.aclose()


async def test_a_report_whose_block_the_replica_lacks_waits_for_the_assignment_rule(
    pool: asyncpg.Pool, anvil: AnvilNode, proxy: RpcProxy, database_url: str, migration_url: str
) -> None:
    """A webhook names a transfer made BEFORE its address was assigned; the replica that
    answers `eth_getBlockByHash` does not hold that block yet (null) while another gave
    the receipt. The old job took the unknown time as "not before assignment" and
    credited 1 ETH; now the report waits, then is refuted once the header is there."""
    settings = lifecycle_settings(
        database_url, migration_url, proxy.url, chain_assignment_slack_s=1.0
    )
    address = new_address()
    early = await anvil.send_eth(address, WEI_PER_ETH)
    await asyncio.sleep(3.5)  # block timestamps are whole seconds
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "ETH")
        await assign_address(conn, CHAIN, address, account.id)
    await anvil.mine(3)
    await deliver(pool, settings, generic_event(address, "1", early, "ETH", None))
    lagging = True

    def no_header(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
        if lagging and method == "eth_getBlockByHash":
            return {**answer, "result": None}
        return answer

    proxy.rewrite = no_header
    oracle = FinalityOracle(settings, None, redis_settings=settings)
    try:
        for _ in range(3):
            await run(pool, settings, oracle)
        assert await balance(pool, account.id) == 0
        status = await pool.fetchval(
            "SELECT status FROM chain_deposit_reports WHERE tx_hash = $1", early
        )
        assert status == "pending"
        lagging = False
        await pool.execute("UPDATE chain_deposit_reports SET next_check_at = now()")
        for _ in range(2):
            await run(pool, settings, oracle)
    finally:
        await oracle.aclose()
    row = await pool.fetchrow(
        "SELECT status, reason FROM chain_deposit_reports WHERE tx_hash = $1", early
    )
    assert row["status"] == "refuted"
    assert row["reason"].startswith("not creditable: before_assignment")
    assert await balance(pool, account.id) == Decimal(0)
    assert await pool.fetchval("SELECT count(*) FROM chain_deposits") == 0


async def test_a_head_going_backwards_is_a_node_behind_not_a_reorg(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    anvil: AnvilNode,
    proxy: RpcProxy,
) -> None:
    """The load balancer sends `eth_blockNumber` to a replica 5 blocks behind, which has
    no block at the cursor's height. The old scanner took it for a reorg: it counted one,
    walked the cursor back and dropped the kept hashes above."""
    world = await build_world(pool, owner_pool, settings, anvil, eth_rpc_url=proxy.url)
    await anvil.mine(12)
    await world.scanner.catch_up(CHAIN)
    before = await cursor(pool)
    replica_head = before[0] - 5

    def behind(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
        if method == "eth_blockNumber":
            return {**answer, "result": hex(replica_head)}
        if method == "eth_getBlockByNumber" and str(params[0]).startswith("0x"):
            if (hex_int(params[0]) or 0) > replica_head:
                return {**answer, "result": None}
        return answer

    proxy.rewrite = behind
    reorgs = REORGS.labels(CHAIN)._value.get()
    for _ in range(3):
        result = await world.scanner.step(CHAIN)
        assert result.caught_up and result.reorg_depth is None
    assert REORGS.labels(CHAIN)._value.get() == reorgs
    assert await cursor(pool) == before
    kept = await pool.fetchval(
        "SELECT count(*) FROM chain_scanner_blocks WHERE chain = $1 AND block_number > $2",
        CHAIN,
        replica_head,
    )
    assert kept == 5
    proxy.rewrite = lambda _m, _p, answer: answer
    assert (await world.scanner.step(CHAIN)).caught_up
    assert await cursor(pool) == before
    await world.oracle.aclose()


async def test_a_replica_without_the_credited_block_reverses_nothing(
    pool: asyncpg.Pool, anvil: AnvilNode, proxy: RpcProxy, database_url: str, migration_url: str
) -> None:
    """On `confirmations:1`, a credited 1 ETH deposit is watched for reorgs. The replica
    that answers has neither the block at the deposit's height (null header) nor the
    receipt, while the head says the chain is past it. The old job took that for a reorg
    and debited the 1 ETH (reversal, and a shortfall froze the account had it been
    spent); only another block at that height proves a reorg."""
    settings = lifecycle_settings(
        database_url, migration_url, proxy.url, eth_confirmation_policy="confirmations:1"
    )
    account, address = await open_account(pool, settings, "ETH")
    tx = await anvil.send_eth(address, WEI_PER_ETH)
    await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
    await anvil.mine(2)
    height = hex_int((await anvil.receipt(tx))["blockNumber"])
    oracle = FinalityOracle(settings, None, redis_settings=settings)
    try:
        stats = [await run(pool, settings, oracle) for _ in range(3)]
        assert sum(s.credited for s in stats) == 1
        assert await balance(pool, account) == Decimal(1)
        lagging = True

        def replica(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
            if not lagging:
                return answer
            if method == "eth_getBlockByNumber" and hex_int(params[0]) == height:
                return {**answer, "result": None}
            if method in ("eth_getTransactionReceipt", "eth_getTransactionByHash"):
                return {**answer, "result": None}
            return answer

        proxy.rewrite = replica
        stats = [await run(pool, settings, oracle) for _ in range(3)]
        assert sum(s.reversed for s in stats) == 0
        assert await balance(pool, account) == Decimal(1)
        lagging = False
        stats = [await run(pool, settings, oracle) for _ in range(2)]
    finally:
        await oracle.aclose()
    assert sum(s.reversed + s.credited for s in stats) == 0
    assert await ledger(pool, account) == [
        (f"chain:{transfer_id(CHAIN, tx, -1)}", "deposit", Decimal(1))
    ]
    status = await pool.fetchval("SELECT status FROM chain_deposits WHERE tx_hash = $1", tx)
    assert status == "credited"


async def test_a_replica_without_a_verified_deposits_block_orphans_nothing(
    pool: asyncpg.Pool, anvil: AnvilNode, proxy: RpcProxy, database_url: str, migration_url: str
) -> None:
    """A verified (not yet final) deposit, and the answering replica has neither its
    block's header nor its receipt. The old job called it orphaned; it stays verified
    and is credited once when the node shows the block final."""
    settings = lifecycle_settings(
        database_url, migration_url, proxy.url, eth_confirmation_policy="confirmations:1"
    )
    account, address = await open_account(pool, settings, "ETH")
    tx = await anvil.send_eth(address, WEI_PER_ETH)
    await anvil.receipt(tx)
    await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
    height = hex_int((await anvil.receipt(tx))["blockNumber"])
    oracle = FinalityOracle(settings, None, redis_settings=settings)
    lagging = False

    def replica(method: str, params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
        if not lagging:
            return answer
        if method == "eth_getBlockByNumber" and str(params[0]).startswith("0x"):
            if hex_int(params[0]) == height:
                return {**answer, "result": None}
        if method in ("eth_getTransactionReceipt", "eth_getTransactionByHash"):
            return {**answer, "result": None}
        return answer

    proxy.rewrite = replica
    try:
        assert (await run(pool, settings, oracle)).credited == 0  # verified, not final
        lagging = True
        await anvil.mine(2)
        stats = [await run(pool, settings, oracle) for _ in range(3)]
        assert sum(s.orphaned for s in stats) == 0
        status = await pool.fetchval("SELECT status FROM chain_deposits WHERE tx_hash = $1", tx)
        assert status == "verified"
        lagging = False
        await pool.execute("UPDATE chain_deposits SET next_check_at = now()")
        stats = [await run(pool, settings, oracle) for _ in range(2)]
    finally:
        await oracle.aclose()
    assert sum(s.credited for s in stats) == 1
    assert await balance(pool, account) == Decimal(1)
