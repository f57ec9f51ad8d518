"""`payflow recon --chain [--from-block N]`: print the chain reconciliation."""

from __future__ import annotations

from redis.asyncio import Redis
from rich.console import Console

from payflow.chain.config import chain_configs
from payflow.chain.custody import CustodyReport, reconcile_custody
from payflow.chain.finality import FinalityOracle
from payflow.chain.identity import NodeMisconfigured
from payflow.chain.recon import reconcile_chain
from payflow.config import ChainSettings, DatabaseSettings, RedisSettings
from payflow.db.pool import tool_pool
from payflow.errors import ChainUnavailable

SHOWN = 20


async def run_chain_recon(
    settings: ChainSettings,
    *,
    from_block: int | None,
    database: DatabaseSettings,
    redis_settings: RedisSettings,
) -> bool:
    """Reconcile every configured chain and print the findings; True when clean.
    No chain configured, or a node that cannot be asked, is not clean."""
    console = Console(soft_wrap=True, markup=False, highlight=False)
    configs = chain_configs(settings)
    if not configs:
        console.print("recon chain: no chain RPC configured (ETH_RPC_URL, EVM_CHAINS)")
        return False
    clean = True
    redis = Redis.from_url(redis_settings.redis_url, socket_connect_timeout=2, socket_timeout=5)
    oracle = FinalityOracle(settings, redis, configs, redis_settings=redis_settings)
    try:
        async with tool_pool(database) as pool:
            for chain in configs:
                try:
                    report = await reconcile_chain(
                        pool, settings, oracle, chain, from_block=from_block
                    )
                except ChainUnavailable as error:
                    console.print(f"recon chain={chain} unavailable: {error}")
                    clean = False
                    continue
                except NodeMisconfigured as error:
                    console.print(f"recon chain={chain} stopped: {error}")
                    clean = False
                    continue
                console.print(f"recon {report.summary()}")
                for tid in report.uncredited[:SHOWN]:
                    console.print(f"  uncredited final transfer: {tid}")
                for item in report.credit_without_transfer[:SHOWN]:
                    console.print(f"  credit without a final transfer: {item}")
                for item in report.not_creditable[:SHOWN]:
                    console.print(f"  not creditable (listed, not a mismatch): {item}")
                clean = clean and report.clean
                try:
                    custody = await reconcile_custody(
                        pool, settings, oracle, chain, from_block=from_block
                    )
                except ChainUnavailable as error:
                    console.print(f"recon custody chain={chain} unavailable: {error}")
                    clean = False
                    continue
                print_custody(console, custody)
                clean = clean and custody.clean
    finally:
        await oracle.aclose()
        await redis.aclose()
    return clean


def print_custody(console: Console, report: CustodyReport) -> None:
    """Per asset: books, chain, in flight, difference, and what explains it."""
    console.print(
        f"recon custody chain={report.chain} block={report.block} "
        f"result={'clean' if report.clean else 'MISMATCH'}"
    )
    for moved in report.booked_movements[:SHOWN]:
        console.print(f"  booked: {moved}")
    for line in report.lines:
        console.print(f"  {line.summary()}")
        for why in line.explanations[:SHOWN]:
            console.print(f"    {why}")
    for outflow in report.unexplained_outflows[:SHOWN]:
        console.print(f"  outflow to an unregistered address: {outflow}")
