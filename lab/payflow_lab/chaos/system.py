"""The system under test of a chaos or soak run, built and torn down in one place.

`system(seed, log_dir)` starts the private cluster, a private anvil (a block a second,
`finalized` = head - 2) and the proxies, migrates the private database as `payflow
migrate` does (owner and app roles), creates the merchant and the ETH deposit accounts
(fresh random addresses), starts the seven role processes (with the scanner; ETH_RPC_URL
points at the anvil) through the proxies and waits until the API answers; on exit (also
on failure or Ctrl-C) it stops everything it started.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from uuid import UUID

import asyncpg
import httpx
import structlog
from redis.asyncio import Redis

from payflow.api.auth import create_merchant, new_webhook_secret
from payflow.ingress.service import assign_address
from payflow.payments.gateway import EmulatedGateway
from payflow.webhooks.endpoints import create_endpoint
from payflow_lab.anvil import AnvilNode, find_anvil
from payflow_lab.chaos.cluster import Cluster
from payflow_lab.chaos.load import Client, Target
from payflow_lab.chaos.procs import ROLES, Endpoints, Supervisor, chaos_env
from payflow_lab.chaos.proxy import ProxyThread
from payflow_lab.chaos.receiver import Receiver
from payflow_lab.ports import free_port

log = structlog.get_logger("payflow.chaos")

HEALTH_LIMIT_S = 90.0
GATEWAY_FAILURE_RATE = 0.1
CHAIN = "ETH_MAINNET"
BLOCK_TIME_S = 1  # anvil interval mining: `finalized` (head - 2) moves every second
# ETH of each of anvil's unlocked dev accounts, the load's deposit senders. Anvil's
# default of 10,000 ran out 4 minutes into `--events 100000` (each of the 10 senders sends
# ~80,000 ETH there); deposits then failed silently and the load crawled. 10^12 covers
# 2 x 10^11 deposits of the largest amount (50 ETH).
SENDER_BALANCE_ETH = 10**12
# The chain settings of every role process: the lifecycle and scanner poll every second.
CHAIN_ENV = {
    "CHAIN_DEPOSITS_INTERVAL_S": "1",
    "CHAIN_RECHECK_S": "1",
    "ETH_SCANNER_POLL_INTERVAL_S": "1",
}


@dataclass
class System:
    """Everything a run drives and reads."""

    cluster: Cluster
    anvil: AnvilNode
    proxies: ProxyThread
    supervisor: Supervisor
    receiver: Receiver
    direct_url: str  # the app role straight to PostgreSQL (verdict, drain)
    admin_url: str  # the superuser straight to PostgreSQL (set-up, counts)
    env: dict[str, str]  # the children's environment (through the proxies)
    recon_env: dict[str, str]  # the same, but straight to PostgreSQL
    api_url: str
    api_key: str
    provider_secret: str
    targets: list[Target]
    redis: Redis
    gateway: EmulatedGateway

    def client(self, concurrency: int) -> Client:
        """The load client of this system (open it with `async with`)."""
        return Client(
            self.api_url,
            self.api_key,
            self.provider_secret,
            "X-Alchemy-Signature",
            self.targets,
            self.receiver,
            self.anvil,
            concurrency=concurrency,
        )


async def prepare_accounts(
    admin_url: str, accounts: int, endpoint_url: str | None = None
) -> tuple[str, list[Target]]:
    """A merchant with an API key, and `accounts` ETH accounts of it, each with a fresh
    random deposit address on ETH_MAINNET (no anvil account: nothing sends from them);
    with `endpoint_url`, a webhook endpoint of the merchant there wanting every event."""
    conn = await asyncpg.connect(admin_url)
    try:
        async with conn.transaction():
            merchant_id, api_key, _secret = await create_merchant(conn, "chaos", admin=False)
            targets = []
            for _ in range(accounts):
                account_id: UUID = await conn.fetchval(
                    "INSERT INTO accounts (merchant_id, asset) VALUES ($1, 'ETH') RETURNING id",
                    merchant_id,
                )
                address = "0x" + secrets.token_hex(20)
                await assign_address(conn, CHAIN, address, account_id)
                targets.append(Target(account_id, CHAIN, address))
            if endpoint_url is not None:
                await create_endpoint(
                    conn,
                    merchant_id,
                    url=endpoint_url,
                    events=["*"],
                    secret=new_webhook_secret(),
                    enabled=True,
                )
    finally:
        await conn.close()
    return api_key, targets


async def wait_healthy(url: str, api_key: str, supervisor: Supervisor) -> None:
    """Poll GET /health until 200 (restarting what dies meanwhile)."""
    deadline = time.monotonic() + HEALTH_LIMIT_S
    async with httpx.AsyncClient(base_url=url, timeout=2.0) as client:
        while True:
            supervisor.tick()
            try:
                response = await client.get("/health", headers={"X-API-Key": api_key})
                if response.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the API did not answer /health in {HEALTH_LIMIT_S:.0f} s")
            await asyncio.sleep(0.3)


@asynccontextmanager
async def system(
    seed: int, log_dir: Path, *, accounts: int = 50, keep: bool = False, **env_extra: str
) -> AsyncIterator[System]:
    """Build the system (see the module doc); `env_extra` overrides the children's settings.
    Raises `AnvilNotInstalled` before anything starts when there is no anvil to run."""
    find_anvil()
    cluster = Cluster(keep=keep)
    anvil = AnvilNode(
        block_time_s=BLOCK_TIME_S,
        log_path=str(cluster.root / "anvil.log"),
        extra_args=("--balance", str(SENDER_BALANCE_ETH)),
    )
    proxies: ProxyThread | None = None
    supervisor: Supervisor | None = None
    receiver = Receiver()
    redis: Redis | None = None
    try:
        await asyncio.to_thread(cluster.start)
        await asyncio.to_thread(anvil.start)
        proxies = ProxyThread()
        pg_proxy = proxies.add("postgres", cluster.pg.port)
        rabbit_proxy = proxies.add("rabbitmq", cluster.rabbit.port)
        direct = f"postgresql://payflow_app@127.0.0.1:{cluster.pg.port}/payflow"
        admin = f"postgresql://{cluster.pg.superuser}@127.0.0.1:{cluster.pg.port}/payflow"
        points = Endpoints(
            database_url=f"postgresql://payflow_app@127.0.0.1:{pg_proxy.port}/payflow",
            migration_url=admin,
            rabbitmq_url=f"amqp://guest:guest@127.0.0.1:{rabbit_proxy.port}/",
            redis_url=f"redis://127.0.0.1:{cluster.redis.port}/0",
            api_port=free_port(),
            provider_secret=secrets.token_hex(32),
            gateway_seed=seed,
            gateway_failure_rate=GATEWAY_FAILURE_RATE,
        )
        env = chaos_env(points, ETH_RPC_URL=anvil.url, **{**CHAIN_ENV, **env_extra})
        recon_env = {**env, "DATABASE_URL": direct}
        migrated = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "payflow", "migrate"],
            env=recon_env,
            capture_output=True,
            check=False,
            timeout=300,
        )
        if migrated.returncode != 0:
            raise RuntimeError("payflow migrate failed: " + migrated.stdout.decode()[-500:])
        await receiver.start()
        api_key, targets = await prepare_accounts(admin, accounts, receiver.endpoint_url())
        await asyncio.to_thread(log_dir.mkdir, parents=True, exist_ok=True)
        supervisor = Supervisor(env, log_dir, ROLES)
        supervisor.start_all()
        api_url = f"http://127.0.0.1:{points.api_port}"
        await wait_healthy(api_url, api_key, supervisor)
        redis = Redis.from_url(points.redis_url)
        gateway = EmulatedGateway(
            redis, "payflow:", 0.0, 0.0, GATEWAY_FAILURE_RATE, seed=points.gateway_seed
        )
        yield System(
            cluster=cluster,
            anvil=anvil,
            proxies=proxies,
            supervisor=supervisor,
            receiver=receiver,
            direct_url=direct,
            admin_url=admin,
            env=env,
            recon_env=recon_env,
            api_url=api_url,
            api_key=api_key,
            provider_secret=points.provider_secret,
            targets=targets,
            redis=redis,
            gateway=gateway,
        )
    finally:
        # Every step runs even when an earlier one fails (or the run was interrupted):
        # nothing private may outlive the run.
        steps: list[Callable[[], Awaitable[object]]] = []
        if supervisor is not None:
            steps.append(partial(asyncio.to_thread, supervisor.stop_all))
        if redis is not None:
            steps.append(redis.aclose)
        steps.append(receiver.stop)
        if proxies is not None:
            steps.append(partial(asyncio.to_thread, proxies.close))
        steps += [
            anvil.rpc.aclose,
            partial(asyncio.to_thread, anvil.stop),
            partial(asyncio.to_thread, cluster.stop),
        ]
        for step in steps:
            try:
                await step()
            except BaseException as exc:  # teardown goes on, even when cancelled
                log.warning("payflow.chaos.teardown_failed", error=f"{type(exc).__name__}: {exc}")
