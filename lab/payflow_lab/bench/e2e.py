"""`payflow bench e2e`: the whole system under load, with a local sink and the emulated
gateway answering at once or, with `--gateway-delay 2-5`, after the seed's 2-5 s.

The service runs as real processes (`payflow up`, or one per role with `--split`,
plus optional extra workers/relays; see `services.py`) in a throwaway database and a
throwaway broker prefix. This process drives load through a `Submitter`, by default
`HttpSubmitter` (the public API: merchant payments; deposits enter as the chain
lifecycle's credit events, since a provider webhook only reports a deposit;
`--direct` writes the same rows straight to the database to isolate the pipeline),
in two phases, one at a fixed rate and one at full speed, and receives the webhooks.

Latencies use the database's clock, so a starved driver cannot skew them; what each
one means, and the exactly-once verdict, are in `payflow_lab.bench.e2e_measure`.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import asyncpg
from rich.console import Console

from payflow.api.auth import create_merchant
from payflow.api.db import connection
from payflow.config import Settings
from payflow.db.pool import create_pool
from payflow.db.tx import transaction
from payflow.ingress.registry import USDC_ETH_MAINNET as USDC_CONTRACT
from payflow.ingress.service import assign_address
from payflow.ledger.accounts import create_account
from payflow_lab.bench.common import bench_database, result_line, setup_url
from payflow_lab.bench.e2e_endpoints import (
    EndpointResult,
    endpoint_verdict,
    register_endpoints,
    wait_endpoint_deliveries,
)
from payflow_lab.bench.e2e_measure import exactly_once, measure_phase, report, report_full_cpu
from payflow_lab.bench.history import fill_history
from payflow_lab.bench.http_submit import DepositAddress, HttpSubmitter
from payflow_lab.bench.services import (
    Service,
    ServiceSpec,
    cleanup_broker,
    cleanup_redis,
    cpu_by_program,
    cpu_snapshot,
    service_env,
)
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter, Submitter
from payflow_lab.ports import free_port

COMPLETION_LIMIT_S = 300.0
SUBMIT_CONCURRENCY = 32
# The seed-004 service's payments/s at the gateway delay of 2-5 s, the
# reference of `vs_seed` on the last line.
SEED_PAYMENTS_PER_S_SLOW_GATEWAY = 30.0


@dataclass(frozen=True, slots=True)
class E2EConfig:
    """What `payflow bench e2e` runs."""

    payments: int = 2000
    rate: float = 200.0  # payments/s (and as many deposits/s) in the fixed-rate phase
    workers: int = 0  # extra `payflow worker` processes beside `payflow up`
    relays: int = 0  # extra `payflow relay` processes
    split: bool = False  # one process per role instead of `payflow up`
    direct: bool = False  # write rows straight to the database instead of the HTTP API
    gateway_delay_s: tuple[float, float] = (0.0, 0.0)  # the emulator's uniform delay
    deposits: bool = True  # False: merchant payments only (`--payments-only`)
    prefill: int = 100_000  # finished payments written first (`history.fill_history`)
    endpoints: int = 0  # webhook endpoints of the merchant, each wanting every event


class ChainCreditedDeposits:
    """Payments through the public API; deposits as the chain lifecycle commits them once
    the node shows them final (a provider webhook is only a report; the node's word
    credits, and the bench runs without a node), i.e. the credit event and its
    `ledger.event` row."""

    def __init__(self, http: HttpSubmitter, direct: DirectSubmitter) -> None:
        self.http = http
        self.direct = direct

    async def submit_payment(
        self, merchant_id: uuid.UUID, amount: str, currency: str, key: str, webhook_url: str | None
    ) -> uuid.UUID:
        return await self.http.submit_payment(merchant_id, amount, currency, key, webhook_url)

    async def submit_deposit(self, event_id: str, account_id: uuid.UUID, amount: str) -> None:
        await self.direct.submit_deposit(event_id, account_id, amount)


async def _submit_phase(
    submitter: Submitter,
    *,
    tag: str,
    merchant_id: uuid.UUID,
    accounts: list[uuid.UUID],
    count: int,
    rate: float | None,
    sink_url: str,
    accepted: dict[str, float],
    deposits: bool = True,
) -> None:
    """Submit `count` payments and `count` deposits; paced at `rate` each, or flat out.

    `accepted` receives, per idempotency key / event id, when its commit returned."""
    gate = asyncio.Semaphore(SUBMIT_CONCURRENCY)
    started = time.monotonic()

    async def one(i: int) -> None:
        if rate is not None:
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        async with gate:
            await submitter.submit_payment(merchant_id, "1.25", "USD", f"{tag}-{i}", sink_url)
            accepted[f"{tag}-{i}"] = time.time()
            if not deposits:
                return
            await submitter.submit_deposit(f"{tag}-dep-{i}", accounts[i % len(accounts)], "2.50")
            accepted[f"{tag}-dep-{i}"] = time.time()

    await asyncio.gather(*(one(i) for i in range(count)))


async def _wait_done(
    pool: asyncpg.Pool,
    tag: str,
    count: int,
    service: Service,
    deposits: bool,
    merchant_id: uuid.UUID,
    since: datetime,
) -> None:
    """Poll until the phase `tag` (submitted from the database time `since` on) is done.

    The poll reads only the phase's rows, through the merchant's (merchant_id,
    created_at) index and the events' (created_at) index: on a filled ledger a pattern
    match over whole tables every 0.2 s would be the bench's own load on PostgreSQL."""
    deadline = time.monotonic() + COMPLETION_LIMIT_S
    while time.monotonic() < deadline:
        service.sample()
        if not service.alive():
            raise RuntimeError("a service process died; see its log")
        done = await pool.fetchval(
            "SELECT (SELECT count(*) FROM payments"
            "        WHERE merchant_id = $2 AND created_at >= $3"
            "        AND idempotency_key LIKE $1 || '-%' AND webhook_delivered_at IS NOT NULL)"
            " + (SELECT count(*) FROM payment_events"
            "        WHERE $4 AND created_at >= $3"
            "        AND (event_id LIKE $1 || '-dep-%' OR event_id LIKE 'gen:' || $1 || '-dep-%')"
            "        AND status = 'confirmed')",
            tag,
            merchant_id,
            since,
            deposits,
        )
        if done >= (2 if deposits else 1) * count:
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"phase {tag} did not complete within {COMPLETION_LIMIT_S}s")


async def _wait_settled(pool: asyncpg.Pool, service: Service) -> None:
    """Wait until every ledger event (deposits and the payments' credits) is confirmed: a
    webhook can reach the sink before its payment's credit is posted."""
    deadline = time.monotonic() + COMPLETION_LIMIT_S
    while await pool.fetchval("SELECT count(*) FROM payment_events WHERE status <> 'confirmed'"):
        service.sample()
        if time.monotonic() > deadline:
            raise TimeoutError(f"ledger events not confirmed within {COMPLETION_LIMIT_S}s")
        await asyncio.sleep(0.2)


@dataclass(frozen=True, slots=True)
class BenchTenant:
    """The bench's merchant (its API key stays in memory) and the deposit accounts."""

    merchant_id: uuid.UUID
    api_key: str
    accounts: list[uuid.UUID]
    addresses: dict[uuid.UUID, DepositAddress]


async def _prepare(pool: asyncpg.Pool, settings: Settings) -> BenchTenant:
    """A merchant with an API key, and 100 USDC accounts each with a deposit address."""
    chain = settings.default_chain
    async with connection(pool) as conn, transaction(conn, settings):
        merchant_id, api_key, _secret = await create_merchant(conn, "bench", admin=False)
        accounts = [(await create_account(conn, "USDC")).id for _ in range(100)]
        addresses: dict[uuid.UUID, DepositAddress] = {}
        for account_id in accounts:
            address = "0x" + account_id.hex + "0" * 8  # 40 hex digits, unique per account
            await assign_address(conn, chain, address, account_id)
            addresses[account_id] = DepositAddress(chain, address, "USDC", USDC_CONTRACT)
    return BenchTenant(merchant_id, api_key, accounts, addresses)


async def run_e2e_bench(settings: Settings, config: E2EConfig, log_dir: Path) -> bool:
    """Run both phases; print figures and the machine-readable last line.

    Returns True when exactly-once was verified and reconciliation is clean.
    """
    console = Console(soft_wrap=True)
    prefix = f"bench_{uuid.uuid4().hex[:8]}"
    redis_prefix = f"payflow-{prefix}:"
    spec = ServiceSpec(config.split, config.workers, config.relays, free_port())
    sink = WebhookSink(keep_bodies=False)
    await sink.start()
    http: HttpSubmitter | None = None
    endpoints: EndpointResult | None = None
    async with bench_database(settings) as url:
        console.print(f"filling the ledger: {config.prefill} finished payments, VACUUM ANALYZE")
        await fill_history(setup_url(settings, url), config.prefill)
        bench_settings = settings.model_copy(update={"database_url": url})
        # Over HTTP the driver only polls and measures; direct writes need a slot each.
        size = SUBMIT_CONCURRENCY + 4 if config.direct else 4
        pool = await create_pool(bench_settings, min_size=2, max_size=size)
        tenant = await _prepare(pool, bench_settings)
        provider_secret = secrets.token_hex(32)
        env = service_env(
            settings,
            url,
            prefix,
            api_port=spec.api_port,
            provider_secret=provider_secret,
            redis_prefix=redis_prefix,
            gateway_delay_s=config.gateway_delay_s,
        )
        service = Service(env, spec, log_dir)
        try:
            await service.wait_healthy(tenant.api_key)
            targets = await register_endpoints(
                service.api_url, tenant.api_key, sink, config.endpoints
            )
            submitter: Submitter
            if config.direct:
                submitter = DirectSubmitter(pool, bench_settings)
            else:
                http = HttpSubmitter(
                    "127.0.0.1",
                    spec.api_port,
                    api_key=tenant.api_key,
                    provider_secret=provider_secret,
                    signature_header=settings.provider_signature_header,
                    addresses=tenant.addresses,
                    max_connections=SUBMIT_CONCURRENCY,
                )
                submitter = ChainCreditedDeposits(http, DirectSubmitter(pool, bench_settings))
            # Warm-up: connections, prepared statements, the merchant account.
            accepted: dict[str, float] = {}
            submit = functools.partial(
                _submit_phase,
                submitter,
                accepted=accepted,
                merchant_id=tenant.merchant_id,
                accounts=tenant.accounts,
                sink_url=sink.url,
                deposits=config.deposits,
            )
            since = await pool.fetchval("SELECT now()")
            await submit(tag="warm", count=50, rate=None)
            await _wait_done(pool, "warm", 50, service, config.deposits, tenant.merchant_id, since)
            results = []
            cpu_before = cpu_snapshot()
            wall_before = time.monotonic()
            full_used: dict[str, float] = {}
            full_wall = 0.0
            for tag, name, rate in (
                ("fixed", f"fixed rate {config.rate:g}/s", config.rate),
                ("full", "full speed", None),
            ):
                if tag == "full":
                    full_before, full_roles = cpu_snapshot(), service.cpu_by_role()
                    full_wall = time.monotonic()
                since = await pool.fetchval("SELECT now()")
                await submit(tag=tag, count=config.payments, rate=rate)
                await _wait_done(
                    pool, tag, config.payments, service, config.deposits, tenant.merchant_id, since
                )
                if tag == "full":
                    full_wall = time.monotonic() - full_wall
                    roles = service.cpu_by_role()
                    full_used = {
                        **cpu_by_program(full_before, cpu_snapshot()),
                        **{name: roles[name] - full_roles[name] for name in roles},
                    }
                results.append(await measure_phase(pool, tag, name, accepted))
            service.sample()
            cpu_after = cpu_snapshot()
            wall = time.monotonic() - wall_before
            await _wait_settled(pool, service)
            if targets:
                await wait_endpoint_deliveries(
                    pool, tenant.merchant_id, COMPLETION_LIMIT_S, service.alive
                )
                endpoints = await endpoint_verdict(pool, tenant.merchant_id, sink, targets)
            total = 2 * config.payments + 50
            once, clean = await exactly_once(
                pool, bench_settings, sink, total, total if config.deposits else 0, config.prefill
            )
        finally:
            exit_codes = service.stop()
            if http is not None:
                await http.aclose()
            await pool.close()
            await sink.stop()
            await cleanup_broker(settings, prefix)
            await cleanup_redis(settings, redis_prefix)
    cpu = {k: used / wall for k, used in cpu_by_program(cpu_before, cpu_after).items()}
    report(console, config, results, service, exit_codes, cpu, wall, http)
    full_cores = {k: used / full_wall for k, used in full_used.items()}
    busy_share = report_full_cpu(console, full_cores, results[1].payments_per_s)
    console.print(
        f"exactly-once verified: {'yes' if once else 'no'}; "
        f"reconciliation: {'clean' if clean else 'dirty'}"
    )
    extra: dict[str, object] = {}
    tail: dict[str, object] = {}
    if endpoints is not None:
        console.print(
            f"webhook endpoints: {endpoints.endpoints}, {endpoints.payment_events} payment "
            f"events; deliveries delivered {endpoints.delivered}, dead {endpoints.dead}; "
            f"the sink got {endpoints.received} requests, {endpoints.distinct} distinct "
            f"webhook-ids; full speed {endpoints.full_per_s:.1f} endpoint deliveries/s; "
            f"every payment event once per endpoint: {'yes' if endpoints.once else 'no'}"
        )
        tail.update(
            endpoint_deliveries=endpoints.delivered,
            endpoint_deliveries_per_s=round(endpoints.full_per_s, 1),
            endpoint_dead=endpoints.dead,
            endpoint_once="yes" if endpoints.once else "no",
        )
    fixed, full = results
    low, high = config.gateway_delay_s
    if high > 0:
        extra["vs_seed"] = round(full.payments_per_s / SEED_PAYMENTS_PER_S_SLOW_GATEWAY, 2)
    print(
        result_line(
            gateway_delay=f"{low:g}-{high:g}",
            gateway_max_in_flight=settings.gateway_max_in_flight,
            deposits="yes" if config.deposits else "no",
            events_per_s=round(full.events_per_s, 1),
            payments_per_s=round(full.payments_per_s, 1),
            sustained_per_s=round(full.sustained_per_s, 1),
            **extra,
            publish_p50_ms=fixed.figures()["publish_p50_ms"],
            terminal_p99_ms=fixed.figures()["terminal_p99_ms"],
            delivered_p99_ms=fixed.figures()["delivered_p99_ms"],
            exactly_once="yes" if once else "no",
            recon="clean" if clean else "dirty",
            rss_mb=round(max(service.peak_rss_mb.values()), 1),
            cpu_busy_full=round(busy_share, 2),
            endpoints=config.endpoints,
            **tail,
        )
    )
    return once and clean and (endpoints is None or endpoints.once)
