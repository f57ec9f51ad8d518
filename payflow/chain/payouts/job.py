"""The scheduler job `payouts`: one `PayoutEngine.tick` on the configured chain."""

from __future__ import annotations

from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.signer import wallets_from_settings
from payflow.chain.rpc import RpcClient
from payflow.config import Settings
from payflow.ops.jobs import JobContext, JobResult, Outcome


def payout_rpc_url(settings: Settings) -> str | None:
    """`PAYOUT_RPC_URL`, else the chain settings' `ETH_RPC_URL` when that exists."""
    fallback = getattr(settings, "eth_rpc_url", None)
    return settings.payout_rpc_url or (str(fallback) if fallback else None)


async def payouts_job(ctx: JobContext) -> JobResult:
    """Sign and send held payouts, track receipts, bump, rebroadcast, post or void.

    Outcome `skipped` without a hot wallet or an RPC URL; `alert` when payouts wait for
    funds or are stuck (the alerts `payouts.hot_wallet_low`, `payouts.stuck`)."""
    wallets = wallets_from_settings(ctx.settings)
    url = payout_rpc_url(ctx.settings)
    if not wallets or url is None:
        return JobResult(Outcome.SKIPPED, "no hot wallet or RPC URL configured")
    async with RpcClient(url, chain=ctx.settings.payout_chain) as rpc:
        engine = PayoutEngine(ctx.pool, ctx.settings, rpc, wallets, alerts=ctx.alerts)
        report = await engine.tick()
    outcome = Outcome.ALERT if report.waiting or report.stuck else Outcome.OK
    return JobResult(outcome, report.summary())
