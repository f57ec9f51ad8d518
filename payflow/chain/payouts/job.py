"""The scheduler job `payouts`: one `PayoutEngine.tick` on `PAYOUT_CHAIN`, with the
chain's RPC and finality policy from the chain configuration (`ETH_RPC_URL`/`EVM_CHAINS`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis

from payflow.alerts import Severity
from payflow.chain.config import ChainConfig, chain_configs
from payflow.chain.finality import FinalityOracle
from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.holds import SQL
from payflow.chain.payouts.signer import wallets_from_settings
from payflow.config import ChainSettings, DatabaseSettings, PayoutSettings, RedisSettings
from payflow.jobs.spec import JobContext, JobResult, Outcome


def payout_chain_config(settings: PayoutSettings, *, chains: ChainSettings) -> ChainConfig | None:
    """The configuration of `PAYOUT_CHAIN`; None when that chain has no RPC configured."""
    return chain_configs(chains).get(settings.payout_chain)


@asynccontextmanager
async def payout_oracle(
    settings: PayoutSettings,
    redis: Redis | None,
    *,
    chains: ChainSettings,
    redis_settings: RedisSettings,
) -> AsyncIterator[FinalityOracle | None]:
    """The finality oracle of the payout chain alone (None without an RPC), closed after."""
    config = payout_chain_config(settings, chains=chains)
    if config is None:
        yield None
        return
    oracle = FinalityOracle(chains, redis, {config.name: config}, redis_settings=redis_settings)
    try:
        yield oracle
    finally:
        await oracle.aclose()


async def payouts_job(ctx: JobContext) -> JobResult:
    """Sign and send held payouts, track receipts, bump, rebroadcast, post or void.

    `alert` when payouts wait for funds, are stuck or stall (alerts
    `payouts.hot_wallet_low`, `payouts.stuck`, `payouts.stalled`), or when open payouts
    exist but no hot wallet or no RPC for `PAYOUT_CHAIN` is configured
    (`payouts.unconfigured`); `ok` otherwise.
    A node that cannot be asked raises the retryable `ChainUnavailable` (a failed run;
    the next tick resumes from PostgreSQL)."""
    settings, chains = ctx.slice(PayoutSettings), ctx.slice(ChainSettings)
    wallets = wallets_from_settings(settings)
    oracle_of = payout_oracle(
        settings, ctx.redis, chains=chains, redis_settings=ctx.slice(RedisSettings)
    )
    async with oracle_of as oracle:
        if not wallets or oracle is None:
            return await _unconfigured(ctx)
        rpc = oracle.clients[settings.payout_chain]
        engine = PayoutEngine(
            ctx.pool,
            settings,
            rpc,
            wallets,
            finality=oracle,
            alerts=ctx.alerts,
            database=ctx.slice(DatabaseSettings),
            chains=chains,
        )
        report = await engine.tick()
    if report.errors:
        await ctx.alerts.fire(
            "payouts.errors",
            Severity.WARNING,
            f"{report.errors} payout(s) could not be tracked this run (see"
            " payflow.payouts.track_failed); they are retried every run",
            details={"errors": report.errors},
        )
    else:
        await ctx.alerts.resolve("payouts.errors")
    troubled = report.waiting or report.stuck or report.stalled or report.errors
    outcome = Outcome.ALERT if troubled else Outcome.OK
    return JobResult(outcome, report.summary())


async def _unconfigured(ctx: JobContext) -> JobResult:
    """Without a hot wallet or an RPC nothing can leave: fine while no payout is open."""
    chain = ctx.slice(PayoutSettings).payout_chain
    async with ctx.pool.acquire() as conn:
        open_count = await conn.fetchval(SQL["count_open"], chain)
    if not open_count:
        await ctx.alerts.resolve("payouts.unconfigured")
        return JobResult(Outcome.OK, "no open payouts (no hot wallet or RPC configured)")
    await ctx.alerts.fire(
        "payouts.unconfigured",
        Severity.CRITICAL,
        f"{open_count} open payout(s) on {chain} but no hot wallet or no RPC is configured for it",
        details={"chain": chain, "open": open_count},
    )
    return JobResult(Outcome.ALERT, f"open={open_count} unconfigured")
