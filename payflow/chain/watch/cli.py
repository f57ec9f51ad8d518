"""`payflow scanner --once`: walk every configured chain up to head - lag, print a line
per chain, and exit (for operators and cron-style runs; the role loops instead)."""

from __future__ import annotations

from rich.console import Console

from payflow.chain.finality import FinalityOracle
from payflow.chain.identity import NodeMisconfigured
from payflow.chain.watch.scanner import Scanner
from payflow.config import ChainSettings, DatabaseSettings, ObservabilitySettings, RedisSettings
from payflow.db.pool import create_pool
from payflow.observability import configure_logging


async def scan_once(
    settings: ChainSettings,
    *,
    database: DatabaseSettings,
    redis_settings: RedisSettings,
    observability: ObservabilitySettings,
) -> bool:
    """Catch every chain up once; False (exit 1) when no chain is configured or a
    chain's node failed its check (one line saying what to change)."""
    configure_logging(observability)
    out = Console(soft_wrap=True)
    oracle = FinalityOracle(settings, None, redis_settings=redis_settings)
    if not oracle.configs:
        out.print("payflow: no chain configured (ETH_RPC_URL or EVM_CHAINS)", style="red")
        return False
    pool = await create_pool(database, min_size=1, max_size=2)
    try:
        scanner = Scanner(pool, settings, oracle, database=database)
        ok = True
        for chain in oracle.configs:
            try:
                results = await scanner.catch_up(chain)
            except NodeMisconfigured as error:
                out.print(f"payflow: {error}", style="red", markup=False, highlight=False)
                ok = False
                continue
            walked = sum(r.walked for r in results)
            found = sum(r.transfers for r in results)
            reorgs = sum(1 for r in results if r.reorg_depth is not None)
            last = results[-1]
            out.print(
                f"{chain}: cursor={last.cursor} head={last.head} walked={walked} "
                f"transfers={found} reorgs={reorgs}"
            )
    finally:
        await pool.close()
        await oracle.aclose()
    return ok
