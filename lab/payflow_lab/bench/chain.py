"""`payflow bench chain`: the scanner against a bare block walk, deposit verification
with a cold and a warm cache, and RPC calls per credited deposit.

Against an anvil the bench starts itself, with `blocks` pre-mined blocks of
`per_block` transfers each (native and ERC-20 alternating, to `addresses` deposit
addresses), in a throwaway `*_bench_*` database and a throwaway Redis prefix:
1. bare walk: `eth_getBlockByNumber` (full, batched like the scanner) and one
   `eth_getLogs` (registered token, Transfer topic) per `ETH_SCANNER_BATCH_BLOCKS`;
2. scanner: `Scanner.catch_up` over the same range, through the breaker, with the
   receipts for positions and every observation committed in PostgreSQL;
3. verification: `verify_claim` of every deposit once the range is final, first with
   an empty cache (cold) then again (warm: no RPC call expected);
4. lifecycle: `process_deposits` until every deposit is credited.
RPC calls are `payflow_rpc_requests_total` deltas (a batch item counts as one call)
and HTTP requests to the node.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
from redis.asyncio import Redis
from rich.console import Console

from payflow.alerts import LogAlertSink
from payflow.api.auth import create_merchant
from payflow.chain.finality import FinalityOracle
from payflow.chain.lifecycle import process_deposits
from payflow.chain.rpc import RPC_REQUESTS, RpcClient, to_hex
from payflow.chain.transfers import TRANSFER_TOPIC
from payflow.chain.verify import Truth, verify_claim
from payflow.chain.watch.blocks import read_headers
from payflow.chain.watch.scanner import Scanner
from payflow.config import Settings
from payflow.db.pool import create_pool
from payflow.observability import configure_logging
from payflow_lab.anvil import DEFAULT_ACCOUNTS, AnvilNode, encode_call
from payflow_lab.bench.common import bench_database, result_line, setup_url

CHAIN = "ETH_MAINNET"


@dataclass(frozen=True, slots=True)
class ChainBenchConfig:
    blocks: int = 200
    per_block: int = 20
    addresses: int = 50
    batch_blocks: int = 50
    ours_every: int = 4  # 1 transfer pair (native + token) in `ours_every` is ours


def rpc_total() -> float:
    """Every JSON-RPC call counted so far (all methods and outcomes)."""
    return sum(
        sample.value
        for metric in RPC_REQUESTS.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
    )


def _recipient(k: int, config: ChainBenchConfig, targets: list[str]) -> tuple[str, bool]:
    """Transfer k's recipient and whether it is one of our deposit addresses: pairs
    (native k even, token k odd) go to us one in `ours_every`; targets alternate an ETH
    and a USDC account, so native value lands on ETH and tokens on USDC accounts."""
    pair = k // 2
    if pair % config.ours_every:
        return "0x" + f"{k:040x}"[-40:].replace("0", "e", 1), False  # someone else's
    index = (pair // config.ours_every) % (len(targets) // 2)
    return targets[2 * index + (k % 2)], True


async def _fill(node: AnvilNode, config: ChainBenchConfig, token: str, targets: list[str]) -> int:
    """Pre-mine the blocks; the first block of the range."""
    sender = DEFAULT_ACCOUNTS[0]
    await node.receipt(await node.token_mint(token, sender, 10**15))
    await node.set_automine(False)
    first = await node.head() + 1
    nonce = int(await node.rpc.call("eth_getTransactionCount", sender, "pending"), 16)
    k = 0
    for _ in range(config.blocks):
        calls: list[tuple[str, list[Any]]] = []
        for _ in range(config.per_block):
            to, _ = _recipient(k, config, targets)
            if k % 2 == 0:
                tx = {"from": sender, "to": to, "value": to_hex(10**15 + k), "gas": to_hex(21_000)}
            else:
                data = encode_call(
                    "transfer(address,uint256)", ["address", "uint256"], [to, 1_000 + k]
                )
                tx = {"from": sender, "to": token, "data": data, "gas": to_hex(100_000)}
            tx["nonce"] = to_hex(nonce + k)  # explicit: a batch is not sequential in anvil
            calls.append(("eth_sendTransaction", [tx]))
            k += 1
        await node.rpc.batch(calls)
        await node.mine(1)
    await node.set_automine(True)
    await node.mine(3)  # the whole range final (finalized = head - 2)
    return first


async def _bare_walk(url: str, first: int, last: int, token: str, batch: int) -> int:
    """Blocks and Transfer logs of the range, no receipts, no database; logs found."""
    found = 0
    async with RpcClient(url, timeout_s=30) as rpc:

        async def call(fn: Any) -> Any:
            return await fn(rpc)

        for start in range(first, last + 1, batch):
            end = min(start + batch - 1, last)
            await read_headers(call, list(range(start, end + 1)), full=True)
            logs = await rpc.get_logs(start, end, address=[token], topics=[TRANSFER_TOPIC])
            found += len(logs)
    return found


async def run_chain_bench(settings: Settings, config: ChainBenchConfig, out: Console) -> bool:
    """Run the benchmark; print figures and the `key=value` line. False on a miss."""
    configure_logging(settings.model_copy(update={"log_level": "WARNING"}))
    node = AnvilNode().start()
    prefix = f"payflow-bench-chain-{uuid.uuid4().hex[:8]}:"
    redis = Redis.from_url(settings.redis_url)
    try:
        async with bench_database(settings) as url:
            return await _run(settings, config, out, node, url, prefix, redis)
    finally:
        keys = [key async for key in redis.scan_iter(match=prefix + "*")]
        if keys:
            await redis.delete(*keys)
        await redis.aclose()
        await node.aclose()


async def _run(
    base: Settings,
    config: ChainBenchConfig,
    out: Console,
    node: AnvilNode,
    url: str,
    prefix: str,
    redis: Redis,
) -> bool:
    settings = base.model_copy(
        update={
            "database_url": url,
            "eth_rpc_url": node.url,
            "eth_scanner_lag_blocks": 0,
            "eth_scanner_batch_blocks": config.batch_blocks,
            "redis_key_prefix": prefix,
            "chain_deposits_batch": 10_000,
            "chain_recheck_s": 0.001,
        }
    )
    token = await node.deploy_token("Bench USD", "USDC", 6)
    targets = ["0x" + uuid.uuid4().hex + uuid.uuid4().hex[:8] for _ in range(config.addresses)]
    owner = await asyncpg.connect(setup_url(base, url))
    try:
        merchant, _, _ = await create_merchant(owner, "bench-chain", admin=False)
        for i, address in enumerate(targets):
            asset = "ETH" if i % 2 == 0 else "USDC"
            account = await owner.fetchval(
                "INSERT INTO accounts (merchant_id, asset) VALUES ($1, $2) RETURNING id",
                merchant,
                asset,
            )
            await owner.execute(
                "INSERT INTO deposit_addresses (chain, address, account_id) VALUES ($1, $2, $3)",
                CHAIN,
                address,
                account,
            )
        await owner.execute(
            "INSERT INTO chain_tokens (chain, contract, asset, decimals)"
            " VALUES ($1, $2, 'USDC', 6)",
            CHAIN,
            token,
        )
    finally:
        await owner.close()
    # Targets alternate ETH/USDC accounts and transfers alternate native/token, so with an
    # even address count every transfer lands on an account of its asset.
    t0 = time.perf_counter()
    first = await _fill(node, config, token, targets)
    last = first + config.blocks - 1
    fill_s = time.perf_counter() - t0
    transfers = config.blocks * config.per_block
    deposits = sum(_recipient(k, config, targets)[1] for k in range(transfers))
    out.print(
        f"anvil: {config.blocks} blocks x {config.per_block} transfers ({transfers}, "
        f"native and ERC-20 alternating), {deposits} of them to our {config.addresses} "
        f"addresses; filled in {fill_s:.1f}s"
    )

    t0 = time.perf_counter()
    bare_logs = await _bare_walk(node.url, first, last, token, config.batch_blocks)
    bare_s = time.perf_counter() - t0

    pool = await create_pool(settings.database, min_size=1, max_size=4)
    head = await node.head()
    scan_settings = settings.model_copy(
        update={"eth_scanner_start_block": first, "eth_scanner_lag_blocks": head - last}
    )
    oracle = FinalityOracle(scan_settings.chain, redis, redis_settings=scan_settings.redis)
    try:
        scanner = Scanner(pool, oracle.settings, oracle, database=scan_settings.database)
        rpc0, http0 = rpc_total(), oracle.rpc_calls
        t0 = time.perf_counter()
        results = await scanner.catch_up(CHAIN)
        scan_s = time.perf_counter() - t0
        scan_rpc, scan_http = rpc_total() - rpc0, oracle.rpc_calls - http0
        walked = sum(r.walked for r in results)
        read_s = sum(r.read_s for r in results)
        write_s = sum(r.write_s for r in results)
        found = sum(r.transfers for r in results)
        rows = await pool.fetch(
            "SELECT tx_hash, position, to_address, contract, units FROM chain_deposits"
        )

        async def verify_all() -> tuple[float, int, float]:
            ok = 0
            before = rpc_total()
            start = time.perf_counter()
            for row in rows:
                truth = await verify_claim(
                    oracle,
                    CHAIN,
                    row["tx_hash"],
                    to_address=row["to_address"],
                    contract=row["contract"],
                    units=int(row["units"]),
                    position=row["position"],
                )
                ok += isinstance(truth, Truth)
            return time.perf_counter() - start, ok, rpc_total() - before

        cold_s, cold_ok, cold_rpc = await verify_all()
        warm_s, warm_ok, warm_rpc = await verify_all()
        await redis.delete(*[k async for k in redis.scan_iter(match=prefix + "*")] or [prefix])

        rpc0 = rpc_total()
        credited, rounds = 0, 0
        while credited < len(rows) and rounds < 50:
            stats = await process_deposits(
                pool, settings.chain, oracle, LogAlertSink(), database=settings.database
            )
            credited += stats.credited
            rounds += 1
        life_rpc = rpc_total() - rpc0
    finally:
        await oracle.aclose()
        await pool.close()

    scan_bps, bare_bps = walked / scan_s, config.blocks / bare_s
    ratio = scan_bps / bare_bps
    per_credit = (scan_rpc + life_rpc) / max(credited, 1)
    out.print(
        f"bare walk: {config.blocks} blocks, {bare_logs} token logs in {bare_s:.2f}s: "
        f"{bare_bps:.0f} blocks/s, {transfers / bare_s:.0f} transfers/s"
    )
    out.print(
        f"scanner:   {walked} blocks, {found} deposits in {scan_s:.2f}s: "
        f"{scan_bps:.0f} blocks/s, {transfers / scan_s:.0f} transfers/s "
        f"({scan_rpc:.0f} RPC calls in {scan_http} HTTP requests; node {read_s:.2f}s, "
        f"PostgreSQL {write_s:.2f}s); ratio {ratio:.2f}"
    )
    out.print(
        f"verify cold: {cold_ok}/{len(rows)} in {cold_s:.2f}s, {len(rows) / cold_s:.0f}/s, "
        f"{cold_rpc:.0f} RPC calls; warm: {warm_ok} in {warm_s:.2f}s, "
        f"{len(rows) / warm_s:.0f}/s, {warm_rpc:.0f} RPC calls"
    )
    out.print(
        f"lifecycle: {credited} credited in {rounds} rounds, {life_rpc:.0f} RPC calls; "
        f"scanner + lifecycle {per_credit:.2f} RPC calls per credited deposit"
    )
    out.print(
        result_line(
            blocks=walked,
            transfers=transfers,
            deposits=found,
            scanner_blocks_s=f"{scan_bps:.0f}",
            scanner_transfers_s=f"{transfers / scan_s:.0f}",
            bare_blocks_s=f"{bare_bps:.0f}",
            bare_transfers_s=f"{transfers / bare_s:.0f}",
            scanner_ratio=f"{ratio:.2f}",
            cold_verify_s=f"{len(rows) / cold_s:.0f}",
            warm_verify_s=f"{len(rows) / warm_s:.0f}",
            cold_rpc_calls=f"{cold_rpc:.0f}",
            warm_rpc_calls=f"{warm_rpc:.0f}",
            credited=credited,
            rpc_per_credit=f"{per_credit:.2f}",
        )
    )
    return found == deposits and credited == found and warm_rpc == 0
