"""`payflow chaos --ha`: the chaos run's seeded load and verdict over the HA lab, with
the faults of losing a machine (`faults.py`), then RPO and RTO as figures.

Phases: bring the lab up with a chain (a private anvil in the root namespace, a scanner
host) and the chaos settings (seeded gateway with declines, short leases and sweeps);
make the merchant and its ETH accounts; start the webhook receiver on the bridge; send
the seeded plan at `rate` through HAProxy while the fault kinds run one after another,
each healed before the next, cycle after cycle (at least `cycles`, and on while the load
runs); retry what got no answer with the same key; wait until quiet; judge.

The verdict is the chaos suite's (nothing lost or duplicated, balances equal to the
model, recon clean, every webhook delivered or dead-lettered, never both) with no dead
letter forgiven (the load's always-failing webhook receivers aside): nothing may be
dead-lettered because of a failover. Besides: RPO 0 (every payment answered 202 is in the
database after the faults), no HTTP 500, every fault executed and healed. The figures are
each fault kind's RTO (worst over its runs). The last line is `key=value`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from uuid import UUID

import asyncpg
from redis.asyncio import Redis
from rich.console import Console

from payflow.payments.gateway import EmulatedGateway
from payflow_lab.anvil import AnvilNode, find_anvil
from payflow_lab.bench.common import result_line
from payflow_lab.chaos.load import Client, Plan, make_plan
from payflow_lab.chaos.receiver import Receiver
from payflow_lab.chaos.run import RESOLVE_LIMIT_S, drain, print_verdict
from payflow_lab.chaos.system import CHAIN_ENV, SENDER_BALANCE_ETH, prepare_accounts
from payflow_lab.chaos.verdict import Verdict, judge
from payflow_lab.ha.faults import KINDS, FaultRecord, HaFaults, cycle
from payflow_lab.ha.netns import SUBNET
from payflow_lab.ha.topology import PROVIDER_SECRET, Lab, LabBusy, unavailable_reason
from payflow_lab.ports import free_port

BRIDGE_ADDRESS = f"{SUBNET}.1"  # the root namespace on the lab's bridge
GATEWAY_FAILURE_RATE = 0.1


class HaUnavailable(RuntimeError):
    """The HA lab cannot run here; the message is one line saying why."""


@dataclass(frozen=True, slots=True)
class HaChaosConfig:
    """What one HA chaos run does: `events` first attempts at `rate`/s, at least `cycles`
    cycles of every fault kind (on while the load runs), `settle_s` of load between two
    faults; `cut_s` and `worker_cut_s` how long a cut database or worker host stays cut."""

    events: int = 600
    seed: int = 1
    rate: float = 4.0
    cycles: int = 1
    concurrency: int = 8
    accounts: int = 20
    settle_s: float = 5.0
    cut_s: float = 30.0
    worker_cut_s: float = 15.0
    drain_limit_s: float = 900.0
    keep: bool = False


@dataclass
class HaResult:
    """The verdict, the faults and the last line's fields."""

    verdict: Verdict
    faults: list[FaultRecord]
    fields: dict[str, object] = field(default_factory=dict)
    ok: bool = False


def _chaos_settings(seed: int, rpc_url: str) -> dict[str, str]:
    """The chaos run's settings for the lab's roles: a seeded gateway with declines and
    calls long enough to be cut mid-way, short leases and sweeps, the receiver allowed."""
    return {
        **CHAIN_ENV,
        "ETH_RPC_URL": rpc_url,
        "GATEWAY_DELAY_MIN_S": "0.2",
        "GATEWAY_DELAY_MAX_S": "1.0",
        "GATEWAY_FAILURE_RATE": str(GATEWAY_FAILURE_RATE),
        "GATEWAY_SEED": str(seed),
        "CHARGE_LEASE_S": "3",
        "WEBHOOK_LEASE_S": "2",
        "WEBHOOK_TIMEOUT_S": "1",
        "WEBHOOK_ALLOW_HOSTS": BRIDGE_ADDRESS,
        "WEBHOOK_SWEEP_AFTER_S": "15",
        "STALE_EVENT_TIMEOUT_S": "10",
        "SWEEP_MAX_BACKOFF_S": "20",
    }


async def _faults_while_loading(
    config: HaChaosConfig, faults: HaFaults, load: asyncio.Task[None], console: Console
) -> None:
    """Every kind once per cycle, healed before the next; at least `config.cycles`
    cycles, then on while the load runs."""
    number = 0
    while number < config.cycles or not load.done():
        for kind in cycle(config.seed, number):
            await asyncio.sleep(config.settle_s)
            record = await faults.run(kind)
            rto = "none" if record.rto_s is None else f"{record.rto_s:.1f} s"
            healed = "no" if record.healed_s is None else f"{record.healed_s:.1f} s"
            console.print(
                f"  fault {kind} on {record.host or '?'}: rto {rto}, whole again after "
                f"{healed}{'; ' + record.error if record.error else ''}",
                markup=False,
            )
            if number >= config.cycles and load.done():  # past the cycles asked for
                break
        number += 1


async def _missing_payments(database_url: str, plan: Plan) -> int:
    """Payments answered 202 that are not in the database now (RPO: must be 0)."""
    answered = [UUID(op.result["payment_id"]) for op in plan.of("payment") if op.result]
    conn = await asyncpg.connect(database_url)
    try:
        found: int = await conn.fetchval(
            "SELECT count(*) FROM payments WHERE id = ANY($1::uuid[])", answered
        )
    finally:
        await conn.close()
    return len(answered) - found


def _rto_fields(records: list[FaultRecord]) -> dict[str, object]:
    """`rto_<kind>_s`: the worst RTO of each kind ("none" when one never recovered)."""
    by_kind: dict[str, list[float | None]] = defaultdict(list)
    for record in records:
        by_kind[record.kind].append(record.rto_s)
    return {
        f"rto_{kind}_s": "none" if None in values else round(max(v or 0.0 for v in values), 1)
        for kind, values in sorted(by_kind.items())
    }


async def run_ha_chaos(config: HaChaosConfig, console: Console) -> HaResult:
    """One HA chaos run (see the module doc). Raises `HaUnavailable` when the lab cannot
    run here, `AnvilNotInstalled` when there is no anvil."""
    find_anvil()  # first: one line and nothing started, wherever the lab could run
    reason = unavailable_reason()
    if reason is not None:
        raise HaUnavailable(reason)
    plan = make_plan(config.seed, config.events, config.accounts)
    console.print(
        f"chaos --ha: seed {config.seed}, {plan.requests} requests "
        f"({len(plan.of('payment'))} payments, {len(plan.of('deposit'))} deposits, "
        f"{len(plan.of('withdrawal'))} withdrawals) at {config.rate:.1f}/s, "
        f"at least {config.cycles} cycle(s) of {len(cycle(config.seed, 0))} fault kinds"
    )
    # Anvil listens on every address of the root namespace: the bridge's address, which
    # the roles use, exists only once the lab has made its network.
    anvil = AnvilNode(
        host="0.0.0.0",  # noqa: S104 - the sandbox's own bridge; dev tooling
        port=free_port(),
        block_time_s=1,
        extra_args=("--balance", str(SENDER_BALANCE_ETH)),
    )
    rpc_url = f"http://{BRIDGE_ADDRESS}:{anvil.port}"
    lab = Lab(
        keep=config.keep,
        extra_env=_chaos_settings(config.seed, rpc_url),
        extra_roles={"scan": ("scanner", 63)},
    )
    receiver = Receiver(host=BRIDGE_ADDRESS)
    redis: Redis | None = None
    try:
        await asyncio.to_thread(anvil.start)
        try:
            await asyncio.to_thread(lab.__enter__)
        except LabBusy as exc:
            raise HaUnavailable(str(exc)) from None
        console.print(
            "lab up: "
            + " ".join(f"{k}={v:.1f}" for k, v in lab.timings.items())
            + f"; logs in {lab.root}"
        )
        assert lab.formation is not None
        api_key, targets = await prepare_accounts(
            lab.formation.dsn(user="postgres"), config.accounts
        )
        await receiver.start()
        redis = Redis.from_url(lab.redis_url)
        gateway = EmulatedGateway(
            redis, "payflow:", 0.0, 0.0, GATEWAY_FAILURE_RATE, seed=config.seed
        )
        client = Client(
            lab.api_url,
            api_key,
            PROVIDER_SECRET,
            "X-Alchemy-Signature",
            targets,
            receiver,
            anvil,
            concurrency=config.concurrency,
        )
        faults = HaFaults(lab, client.answered_at, config.cut_s, config.worker_cut_s)
        started = time.monotonic()
        async with client:
            load = asyncio.create_task(client.run(plan, config.rate))
            try:
                await _faults_while_loading(config, faults, load, console)
                await load
            finally:
                load.cancel()
                with contextlib.suppress(BaseException):
                    await load
            console.print(f"load and faults done in {time.monotonic() - started:.1f} s")
            unresolved = await client.resolve(plan, RESOLVE_LIMIT_S)
        app_dsn = lab.formation.dsn(user="payflow_app")
        drain_s = await drain(app_dsn, plan, config.drain_limit_s, console)
        verdict = await judge(
            app_dsn,
            redis,
            plan,
            [t.account_id for t in targets],
            "USD",
            gateway,
            [],  # no dead letter is explained by a failover
            lab.env(),
        )
        missing = await _missing_payments(app_dsn, plan)
        return _report(
            console, plan, client, faults, verdict, drain_s, len(unresolved), missing, config.cycles
        )
    finally:
        steps = [receiver.stop(), anvil.rpc.aclose()]
        if redis is not None:
            steps.append(redis.aclose())
        for step in steps:
            with contextlib.suppress(Exception):
                await step
        await asyncio.to_thread(lab.close)
        await asyncio.to_thread(anvil.stop)


def _report(
    console: Console,
    plan: Plan,
    client: Client,
    faults: HaFaults,
    verdict: Verdict,
    drain_s: float | None,
    unresolved: int,
    missing: int,
    cycles: int,
) -> HaResult:
    c = client.counters
    console.print(
        f"client: {c.sent} HTTP attempts, {c.ok} 2xx, {c.status_5xx} 5xx of which "
        f"{c.status_500} 500, {c.dropped} dropped or timed out; {c.parked} parked and "
        f"retried after the faults ({unresolved} never answered)"
    )
    print_verdict(console, verdict)
    failed = [r for r in faults.records if r.error or r.rto_s is None or r.healed_s is None]
    for record in failed:
        console.print(f"  fault {record.kind} did not run or heal: {record.error}", markup=False)
    runs = Counter(r.kind for r in faults.records if r not in failed)
    short = sorted(kind for kind in KINDS if runs[kind] < cycles)
    if short:
        console.print(f"  fault kinds run fewer than {cycles} time(s): {', '.join(short)}")
    console.print(f"RPO: {missing} payments answered 202 missing after the faults")
    ok = (
        verdict.exactly_once
        and drain_s is not None
        and missing == 0
        and c.status_500 == 0
        and not failed
        and not short
    )
    fields: dict[str, object] = {
        "events": plan.requests,
        "faults": len(faults.records),
        "lost": verdict.lost,
        "duplicated": verdict.duplicated,
        "rpo_missing": missing,
        "http_500": c.status_500,
        "dead_letters": verdict.dlq_unexplained,
        "recon": "clean" if verdict.recon_clean else "dirty",
        **_rto_fields(faults.records),
        "max_drain_s": "timeout" if drain_s is None else round(drain_s, 1),
        "exactly_once": "yes" if ok else "no",
    }
    print(result_line(**fields), flush=True)
    return HaResult(verdict, faults.records, fields, ok)
