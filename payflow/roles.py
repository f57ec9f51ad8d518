"""Process roles (api, relay, worker, scheduler, scanner) and the runtime they share.

Every role is `async def role(runtime, stop)`, returns when `stop` is set, and finishes
its in-flight work first. `payflow up` runs `UP_ROLES` in one process; `payflow relay`,
`payflow worker` and `payflow scheduler` run one each, to scale out separately.
`payflow scanner` walks the chains' blocks (also inside `up` when `ETH_RPC_URL` is set).
`payflow api` serves the HTTP API alone with uvicorn's own workers; inside `up` it is
the `api` role, one in-process uvicorn server sharing the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import aio_pika
import asyncpg
import structlog
from redis.asyncio import Redis

from payflow.alerts.build import build_alert_sink
from payflow.broker.connection import confirm_channel, connect
from payflow.broker.consumer import Consumer, Route
from payflow.broker.topology import Names, declare_topology
from payflow.config import BrokerSettings, ChainSettings, EmulatorSettings, RedisSettings, Settings
from payflow.db.pool import open_pool_when_ready
from payflow.dlq.fallback import DlqFallback
from payflow.gauges import refreshing_state
from payflow.ledger.announce import ON_PUBLISHED as LEDGER_ON_PUBLISHED
from payflow.ledger.worker import LedgerWorker
from payflow.metrics_server import serving_metrics
from payflow.observability import configure_logging
from payflow.ops.scheduler import run_scheduler
from payflow.outbox.relay import run_relay
from payflow.payments.gateway import EmulatedGateway, Gateway
from payflow.payments.processor import PaymentProcessor
from payflow.webhooks.client import WebhookClient, build_http_client
from payflow.webhooks.direct import DirectSends
from payflow.webhooks.endpoints import EndpointSender
from payflow.webhooks.endpoints.direct import EndpointDirectSends
from payflow.webhooks.sender import WebhookSender

log = structlog.get_logger("payflow.roles")

WORKER_QUEUES: tuple[str, ...] = ("payments", "ledger", "webhooks", "endpoints")
CONNECT_BACKOFF_S = 1.0
# Roles that talk to RabbitMQ: the relay publishes, the worker consumes, the API serves
# the queue-depth gauges on its /metrics. The scheduler and the scanner only write
# PostgreSQL (their messages leave through the outbox), so a broker outage never stops
# them, and a process of only those roles never connects to it.
BROKER_ROLES = frozenset({"api", "relay", "worker"})


@dataclass(slots=True)
class Runtime:
    """What roles share in one process; built by `open_runtime`, closed by it too."""

    settings: Settings
    pool: asyncpg.Pool
    connection: aio_pika.abc.AbstractRobustConnection | None  # None without a BROKER_ROLES role
    names: Names | None  # declared with the connection
    http: WebhookClient
    gateway: Gateway
    worker_queues: tuple[str, ...] = WORKER_QUEUES
    redis: Redis | None = None  # the DLQ fallback (and the emulator's memory)


Role = Callable[[Runtime, asyncio.Event], Coroutine[Any, Any, None]]


def _broker(runtime: Runtime) -> tuple[aio_pika.abc.AbstractRobustConnection, Names]:
    """The broker connection and topology of a process that runs a `BROKER_ROLES` role."""
    if runtime.connection is None or runtime.names is None:
        raise RuntimeError("this role needs the broker; run_roles connects for BROKER_ROLES")
    return runtime.connection, runtime.names


def default_gateway(
    settings: EmulatorSettings, redis: Redis, *, redis_settings: RedisSettings
) -> Gateway:
    """The gateway emulator configured from its slice; it remembers charges in `redis`
    (under `REDIS_KEY_PREFIX`), shared by every worker process like a real gateway."""
    return EmulatedGateway(
        redis,
        redis_settings.redis_key_prefix,
        settings.gateway_delay_min_s,
        settings.gateway_delay_max_s,
        settings.gateway_failure_rate,
        settings.gateway_seed,
    )


async def relay_role(runtime: Runtime, stop: asyncio.Event) -> None:
    """Outbox -> RabbitMQ."""
    connection, names = _broker(runtime)  # before any pool: nothing to close if it raises
    # Its own connections (LISTEN + batches): a busy worker in the same process must
    # never make the relay queue for a pooled connection. The LISTEN connection needs a
    # session, so it goes to DATABASE_DIRECT_URL (PostgreSQL itself, past any PgBouncer
    # in transaction pooling) and its pool resets sessions on release (UNLISTEN); the
    # batch pool only runs transactions with SET LOCAL, so it skips that round trip.
    listen_pool = await open_pool_when_ready(
        runtime.settings.database, stop, dsn=runtime.settings.direct_url(), min_size=1, max_size=1
    )
    if listen_pool is None:
        return
    try:
        pool = await open_pool_when_ready(
            runtime.settings.database, stop, min_size=1, max_size=1, reset_session=False
        )
        if pool is None:
            return
        try:
            channels = [await confirm_channel(connection)]

            async def reopen() -> aio_pika.abc.AbstractExchange:
                # A fresh channel after every publish of a pass was refused (run_relay).
                fresh = await confirm_channel(connection)
                with contextlib.suppress(Exception):
                    await channels.pop().close()
                channels.append(fresh)
                return await fresh.get_exchange(names.exchange)

            try:
                exchange = await channels[0].get_exchange(names.exchange)
                await run_relay(
                    pool,
                    runtime.settings.outbox,
                    exchange,
                    stop,
                    database=runtime.settings.database,
                    listen_pool=listen_pool,
                    on_published=LEDGER_ON_PUBLISHED,
                    reopen=reopen,
                )
            finally:
                for channel in channels:
                    with contextlib.suppress(Exception):
                        await channel.close()
        finally:
            await pool.close()
    finally:
        await listen_pool.close()


def worker_routes(
    runtime: Runtime,
) -> tuple[list[Route], list[DirectSends | EndpointDirectSends]]:
    """The routes a worker consumes, restricted to `runtime.worker_queues`, and the direct
    sends of its payment worker, to wait for at a stop: the payment's webhook (unless
    `WEBHOOK_DIRECT_SEND` is off or this worker does not consume the webhooks queue: a
    worker kept off that queue, say for egress, never POSTs) and its event's deliveries
    to the merchant's endpoints (likewise with the endpoints queue)."""
    settings = runtime.settings
    fallback = DlqFallback(runtime.redis, settings.dlq, redis_settings=settings.redis)
    webhooks = WebhookSender(
        runtime.pool,
        settings.webhooks,
        runtime.http,
        fallback,
        database=settings.database,
        pipeline=settings.pipeline,
        broker=settings.broker,
    )
    endpoints = EndpointSender(
        runtime.pool,
        settings.webhooks,
        runtime.http,
        fallback,
        database=settings.database,
        broker=settings.broker,
    )
    direct = None
    if settings.webhook_direct_send and "webhooks" in runtime.worker_queues:
        direct = DirectSends(runtime.pool, settings.webhooks, webhooks, database=settings.database)
    fan_out = None
    if settings.webhook_direct_send and "endpoints" in runtime.worker_queues:
        fan_out = EndpointDirectSends(
            runtime.pool, settings.webhooks, endpoints, database=settings.database
        )
    payments = PaymentProcessor(
        runtime.pool,
        settings.pipeline,
        runtime.gateway,
        fallback,
        direct,
        database=settings.database,
        endpoint_direct=fan_out,
    )
    ledger = LedgerWorker(runtime.pool, settings.database, fallback)
    # Payments wait on the gateway and webhooks on merchants: each route has its own
    # prefetch (its in-flight bound), so neither takes the ledger's BROKER_PREFETCH slots.
    every = {
        "payments": Route(
            "payments", payments.handle, payments.on_dead, settings.gateway_max_in_flight
        ),
        "ledger": Route("ledger", ledger.handle, ledger.on_dead),
        "webhooks": Route(
            "webhooks", webhooks.handle, webhooks.on_dead, settings.webhook_max_in_flight
        ),
        "endpoints": Route(
            "endpoints", endpoints.handle, endpoints.on_dead, settings.webhook_max_in_flight
        ),
    }
    sends = [s for s in (direct, fan_out) if s is not None]
    return [every[name] for name in runtime.worker_queues], sends


async def worker_role(runtime: Runtime, stop: asyncio.Event) -> None:
    """Consume the work queues until stopped, then drain in-flight messages and the
    direct webhook sends, both within one `SHUTDOWN_GRACE_S` (a send cut short counts its
    attempt, or hands its held job back if it had not POSTed)."""
    connection, names = _broker(runtime)
    routes, direct_sends = worker_routes(runtime)
    consumer = Consumer(connection, runtime.settings.broker, names, routes)
    await consumer.start()
    await stop.wait()
    grace_ends = time.monotonic() + runtime.settings.shutdown_grace_s  # one grace for both
    await consumer.stop(runtime.settings.shutdown_grace_s)
    left = max(grace_ends - time.monotonic(), 0.0)
    await asyncio.gather(*(sends.wait(left) for sends in direct_sends))


async def scheduler_role(runtime: Runtime, stop: asyncio.Event) -> None:
    """The maintenance jobs (`payflow.ops.scheduler.JOBS`), each when due."""
    alerts = build_alert_sink(
        runtime.settings.alerts, runtime.pool, database=runtime.settings.database
    )  # one per process: cooldowns
    await run_scheduler(runtime.pool, runtime.settings, stop, alerts=alerts, redis=runtime.redis)


async def api_role(runtime: Runtime, stop: asyncio.Event) -> None:
    """The HTTP API served in this process (one uvicorn server) until stopped."""
    from payflow.api.server import in_process_server

    server = in_process_server(runtime.settings)
    serving = asyncio.create_task(server.serve())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True  # finishes in-flight requests, then returns
    stopping.cancel()
    await serving


async def scanner_role(runtime: Runtime, stop: asyncio.Event) -> None:
    """The chain scanner (`payflow.chain.watch.scanner`) over every configured chain;
    it waits (never exits) while a node is down. Several replicas may run."""
    from payflow.chain.finality import FinalityOracle
    from payflow.chain.watch.role import run_scanner

    oracle = FinalityOracle(
        runtime.settings.chain, runtime.redis, redis_settings=runtime.settings.redis
    )
    try:
        if not oracle.configs:
            log.warning("payflow.scanner.no_chain", hint="set ETH_RPC_URL or EVM_CHAINS")
            await stop.wait()
            return
        alerts = build_alert_sink(
            runtime.settings.alerts, runtime.pool, database=runtime.settings.database
        )  # node and lag alerts
        await run_scanner(
            runtime.pool,
            runtime.settings.chain,
            oracle,
            stop,
            alerts,
            database=runtime.settings.database,
        )
    finally:
        await oracle.aclose()


ROLES: dict[str, Role] = {
    "api": api_role,
    "relay": relay_role,
    "worker": worker_role,
    "scheduler": scheduler_role,
    "scanner": scanner_role,
}
UP_ROLES: tuple[str, ...] = ("api", "relay", "worker", "scheduler")


def up_roles(settings: ChainSettings) -> tuple[str, ...]:
    """The roles `payflow up` runs: `UP_ROLES`, plus the scanner when a chain's RPC is
    configured (`ETH_RPC_URL` or `EVM_CHAINS`)."""
    if settings.eth_rpc_url or settings.evm_chains:
        return (*UP_ROLES, "scanner")
    return UP_ROLES


async def _connect_with_retry(
    settings: BrokerSettings, name: str, stop: asyncio.Event
) -> aio_pika.abc.AbstractRobustConnection | None:
    while not stop.is_set():
        try:
            return await connect(settings, name=name)
        except (OSError, aio_pika.exceptions.AMQPConnectionError) as exc:
            log.warning("payflow.broker.connect_failed", error=f"{type(exc).__name__}: {exc}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=CONNECT_BACKOFF_S)
    return None


async def run_roles(
    settings: Settings,
    roles: Sequence[str],
    stop: asyncio.Event,
    *,
    gateway: Gateway | None = None,
    worker_queues: tuple[str, ...] = WORKER_QUEUES,
) -> None:
    """Build the runtime, declare the topology, run `roles` until `stop`, then close all.

    Invariant: resources are built here and passed down, never at import time; every
    role has returned (in-flight work finished) before the connections close. Metrics:
    without the `api` role the process serves them on `METRICS_PORT`; the state gauges
    are refreshed in the background once the broker is connected.
    """
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ValueError(f"unknown role(s): {', '.join(unknown)}")
    # Workers and the scheduler never set session state (SET LOCAL and transaction-scoped
    # advisory locks only; the relay LISTENs on its own pool), so releases skip the reset.
    pool = await open_pool_when_ready(settings.database, stop, reset_session=False)
    if pool is None:
        return
    http = build_http_client(settings.webhooks)
    # One Redis client (connects lazily): the DLQ fallback, and the emulator's memory.
    redis = Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=5)
    if gateway is None:
        gateway = default_gateway(settings.emulator, redis, redis_settings=settings.redis)
    connection = None
    exits = contextlib.AsyncExitStack()
    try:
        if "api" not in roles:
            exits.enter_context(serving_metrics(settings.observability))
        names = None
        if BROKER_ROLES.intersection(roles):
            connection = await _connect_with_retry(
                settings.broker, "payflow:" + "+".join(roles), stop
            )
            if connection is None:
                return
            channel = await connection.channel()
            names = await declare_topology(channel, settings.broker)
            await channel.close()
        refreshing = refreshing_state(
            pool,
            settings.observability,
            connection,
            database=settings.database,
            broker=settings.broker,
        )
        await exits.enter_async_context(refreshing)
        runtime = Runtime(
            settings=settings,
            pool=pool,
            connection=connection,
            names=names,
            http=http,
            gateway=gateway,
            worker_queues=worker_queues,
            redis=redis,
        )
        # Everything built so far lives as long as the process (modules, clients, the
        # runtime): keep it out of the cyclic GC's generations, as the API does, so
        # collections under load scan only what the work allocates.
        gc.freeze()
        tasks: list[asyncio.Task[None]] = [
            asyncio.create_task(ROLES[name](runtime, stop), name=name) for name in roles
        ]
        log.info("payflow.roles.started", roles=list(roles))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            failed = [t for t in done if not t.cancelled() and t.exception() is not None]
            if failed:
                stop.set()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise failed[0].exception()  # type: ignore[misc]
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await exits.aclose()
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()
        await http.aclose()
        await redis.aclose()
        await pool.close()
        log.info("payflow.roles.stopped", roles=list(roles))


async def serve(
    settings: Settings, roles: Sequence[str], *, worker_queues: tuple[str, ...] = WORKER_QUEUES
) -> None:
    """Run `roles` in this process until SIGTERM or SIGINT, then shut down gracefully."""
    configure_logging(settings.observability)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await run_roles(settings, roles, stop, worker_queues=worker_queues)
