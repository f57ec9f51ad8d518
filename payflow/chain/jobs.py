"""The chain's scheduled jobs: `chain_deposits` (the lifecycle, every few seconds) and
`recon_chain` (reconciliation with the chain, daily). Both are plain async jobs
(`payflow.jobs.spec`), singletons across replicas through the scheduler's claim, and do
nothing but report "off" when no chain has an RPC configured (deposits then wait,
observed, never credited unverified)."""

from __future__ import annotations

from payflow.alerts import Severity
from payflow.chain.config import chain_configs
from payflow.chain.custody import CustodyReport, reconcile_custody
from payflow.chain.finality import FinalityOracle
from payflow.chain.identity import NodeMisconfigured
from payflow.chain.identity import alert_key as node_alert_key
from payflow.chain.lifecycle import process_deposits
from payflow.chain.payouts.job import payouts_job
from payflow.chain.recon import reconcile_chain
from payflow.config import ChainSettings, DatabaseSettings, PayoutSettings, RedisSettings
from payflow.errors import ChainUnavailable
from payflow.jobs.spec import JobContext, JobResult, JobSpec, Outcome
from payflow.money import format_amount


async def chain_deposits_job(ctx: JobContext) -> JobResult:
    """Verify reports, credit final deposits, orphan the dropped ones, reverse deep reorgs.
    A chain whose node failed its check (`chain.node:<chain>` fired) makes the run an
    ALERT whose summary carries the line; the other chains run."""
    chains = ctx.slice(ChainSettings)
    configs = chain_configs(chains)
    if not configs:
        return JobResult(Outcome.OK, "no chain RPC configured: deposits wait")
    oracle = FinalityOracle(chains, ctx.redis, configs, redis_settings=ctx.slice(RedisSettings))
    try:
        stats = await process_deposits(
            ctx.pool, chains, oracle, ctx.alerts, database=ctx.slice(DatabaseSettings)
        )
    finally:
        await oracle.aclose()
    return JobResult(Outcome.ALERT if stats.stopped else Outcome.OK, stats.summary())


async def recon_chain_job(ctx: JobContext) -> JobResult:
    """Reconcile the last `RECON_CHAIN_WINDOW_BLOCKS` final blocks of every chain."""
    chains = ctx.slice(ChainSettings)
    configs = chain_configs(chains)
    if not configs:
        return JobResult(Outcome.OK, "no chain RPC configured: nothing to compare")
    oracle = FinalityOracle(chains, ctx.redis, configs, redis_settings=ctx.slice(RedisSettings))
    summaries: list[str] = []
    dirty = False
    try:
        for chain in configs:
            try:
                report = await reconcile_chain(ctx.pool, chains, oracle, chain)
            except ChainUnavailable as error:
                summaries.append(f"chain={chain} unavailable: {error}")
                dirty = True
                continue
            except NodeMisconfigured as error:
                summaries.append(f"STOPPED {error}")
                await ctx.alerts.fire(node_alert_key(chain), Severity.CRITICAL, str(error))
                dirty = True
                continue
            summaries.append(report.summary())
            await _not_creditable_alert(ctx, chain, report.not_creditable)
            key = f"recon.chain:{chain}"
            if report.clean:
                await ctx.alerts.resolve(key)
            else:
                dirty = True
                await ctx.alerts.fire(
                    key,
                    Severity.CRITICAL,
                    f"chain reconciliation of {chain} found mismatches",
                    details={
                        "uncredited": report.uncredited[:10],
                        "credit_without_transfer": report.credit_without_transfer[:10],
                    },
                )
            try:
                custody = await reconcile_custody(ctx.pool, chains, oracle, chain)
            except ChainUnavailable as error:
                summaries.append(f"custody chain={chain} unavailable: {error}")
                dirty = True
                continue
            summaries += [line.summary() for line in custody.lines]
            dirty = await _custody_alerts(ctx, custody) or dirty
    finally:
        await oracle.aclose()
    return JobResult(Outcome.ALERT if dirty else Outcome.OK, "; ".join(summaries))


async def _not_creditable_alert(ctx: JobContext, chain: str, listed: list[str]) -> None:
    """Final transfers to our addresses that payflow's rules never credit (an asset that
    is not the account's, over the deposit limit ...): money an operator may have to
    return, so a warning with the first ten, resolved when the window holds none."""
    key = f"recon.chain_not_creditable:{chain}"
    if not listed:
        await ctx.alerts.resolve(key)
        return
    await ctx.alerts.fire(
        key,
        Severity.WARNING,
        f"{len(listed)} final transfer(s) to {chain} deposit addresses that payflow does"
        " not credit (see the reasons)",
        details={"transfers": listed[:10]},
    )


# The chain's maintenance jobs (payouts included); the scheduler (composition root)
# gathers them.
JOBS: tuple[JobSpec, ...] = (
    JobSpec(
        "payouts",
        payouts_job,
        lambda s: s.slice(PayoutSettings).payout_interval_s,
        "sign, send, track, fee-bump and settle on-chain payouts",
    ),
    JobSpec(
        "chain_deposits",
        chain_deposits_job,
        lambda s: s.slice(ChainSettings).chain_deposits_interval_s,
        "verify chain deposit reports, credit final deposits, orphan dropped ones",
    ),
    JobSpec(
        "recon_chain",
        recon_chain_job,
        lambda s: s.slice(ChainSettings).recon_chain_interval_s,
        "final blocks vs credits: uncredited transfers, credits without a transfer",
    ),
)


async def _custody_alerts(ctx: JobContext, report: CustodyReport) -> bool:
    """A custody account that differs from the chain fires `recon.custody:<chain>:<asset>`
    (critical, with what explains it); a token outflow to an unregistered address fires
    `recon.custody_outflow:<tx>:<log>` naming the transaction. True when any fired."""
    fired = False
    for line in report.lines:
        key = f"recon.custody:{line.chain}:{line.asset}"
        if line.clean:
            await ctx.alerts.resolve(key)
            continue
        fired = True
        await ctx.alerts.fire(
            key,
            Severity.CRITICAL,
            f"{line.account} differs from the chain by {line.difference:f} at block {report.block}",
            details={
                "books": format_amount(line.books),
                "chain": format_amount(line.on_chain),
                "in_flight": format_amount(line.in_flight),
                "difference": format_amount(line.difference),
                "explanations": line.explanations[:10],
            },
        )
    for outflow in report.unexplained_outflows:
        fired = True
        await ctx.alerts.fire(
            f"recon.custody_outflow:{outflow.split(' ', 1)[0]}",
            Severity.CRITICAL,
            f"outflow from a {report.chain} address of payflow to an unregistered address:"
            f" {outflow}",
        )
    return fired
