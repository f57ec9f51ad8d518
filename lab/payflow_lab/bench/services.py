"""The service under `payflow bench e2e`: real OS processes, their environment, health,
peak RSS and CPU, and the broker objects they leave behind.

The default is `payflow up` (api + relay + worker + scheduler in one process); `--split`
runs `payflow api`, `payflow relay`, `payflow worker` and `payflow scheduler` apart.
Secrets travel to the children through their environment only and are never printed.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import aio_pika
import httpx
import psutil
from redis.asyncio import Redis

from payflow.broker.topology import declared_names
from payflow.config import Settings
from payflow_lab.supervisor import spawn_payflow

HEALTH_LIMIT_S = 60.0


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """What to run: the layout, extra workers/relays, and where the API listens."""

    split: bool
    workers: int
    relays: int
    api_port: int


def service_env(
    settings: Settings,
    database_url: str,
    prefix: str,
    *,
    api_port: int,
    provider_secret: str,
    redis_prefix: str,
    gateway_delay_s: tuple[float, float] = (0.0, 0.0),
) -> dict[str, str]:
    """The children's environment: the gateway's delay (uniform in `gateway_delay_s`, 0 by
    default) and no declines, the sink allowed, no rate limit in the way; the in-flight
    bounds (`BROKER_PREFETCH`, `GATEWAY_MAX_IN_FLIGHT`, `WEBHOOK_MAX_IN_FLIGHT`) are this
    process's settings."""
    env = dict(os.environ)
    env.pop("API_KEY", None)  # the bench authenticates as a merchant it creates
    env.update(
        DATABASE_URL=database_url,
        RABBITMQ_URL=settings.rabbitmq_url,
        REDIS_URL=settings.redis_url,
        REDIS_KEY_PREFIX=redis_prefix,
        BROKER_PREFIX=prefix,
        API_HOST="127.0.0.1",
        API_PORT=str(api_port),
        API_WORKERS="1",
        PROVIDER_WEBHOOK_SECRET=provider_secret,
        RATE_LIMIT_PER_MINUTE="100000000",
        GATEWAY_DELAY_MIN_S=str(gateway_delay_s[0]),
        GATEWAY_DELAY_MAX_S=str(gateway_delay_s[1]),
        GATEWAY_FAILURE_RATE="0",
        WEBHOOK_ALLOW_HOSTS="127.0.0.1",
        LOG_LEVEL=os.environ.get("BENCH_SERVICE_LOG_LEVEL", "WARNING"),
        RELAY_POLL_INTERVAL_S="1",
        BROKER_PREFETCH=str(settings.broker_prefetch),
        GATEWAY_MAX_IN_FLIGHT=str(settings.gateway_max_in_flight),
        WEBHOOK_MAX_IN_FLIGHT=str(settings.webhook_max_in_flight),
    )
    return env


class Service:
    """The roles as OS processes, with their peak RSS sampled while they run."""

    def __init__(self, env: dict[str, str], spec: ServiceSpec, log_dir: Path) -> None:
        base = [["api"], ["relay"], ["worker"], ["scheduler"]] if spec.split else [["up"]]
        commands = base + [["worker"]] * spec.workers + [["relay"]] * spec.relays
        self.api_url = f"http://127.0.0.1:{spec.api_port}"
        self.names: list[str] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        for index, args in enumerate(commands):
            self.names.append(args[0])
            self._procs.append(spawn_payflow(args, env, log_dir / f"{args[0]}-{index}.log"))
        self.peak_rss_mb: dict[int, float] = {p.pid: 0.0 for p in self._procs}
        self.cpu_s: dict[int, float] = {p.pid: 0.0 for p in self._procs}

    def sample(self) -> None:
        """Record each process's RSS (keeping the peak) and CPU time."""
        for proc in self._procs:
            try:
                info = psutil.Process(proc.pid)
                rss = info.memory_info().rss / 2**20
                times = info.cpu_times()
            except psutil.Error:
                continue
            self.peak_rss_mb[proc.pid] = max(self.peak_rss_mb[proc.pid], rss)
            self.cpu_s[proc.pid] = times.user + times.system

    def cpu_by_role(self) -> dict[str, float]:
        """CPU seconds used so far by each role, summed over its processes (sampled now)."""
        self.sample()
        totals: dict[str, float] = {}
        for name, seconds in zip(self.names, self.cpu_s.values(), strict=True):
            totals[name] = totals.get(name, 0.0) + seconds
        return totals

    def alive(self) -> bool:
        """True while every service process runs."""
        return all(p.poll() is None for p in self._procs)

    async def wait_healthy(self, api_key: str) -> None:
        """Poll `GET /health` (with the merchant's X-API-Key) until it answers 200."""
        deadline = time.monotonic() + HEALTH_LIMIT_S
        async with httpx.AsyncClient(base_url=self.api_url, timeout=2.0) as client:
            while True:
                if not self.alive():
                    raise RuntimeError("a service process exited during start-up; see its log")
                try:
                    response = await client.get("/health", headers={"X-API-Key": api_key})
                    if response.status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the API did not answer /health in {HEALTH_LIMIT_S:.0f} s")
                await asyncio.sleep(0.2)

    def stop(self) -> list[int]:
        """SIGTERM every process and return their exit codes."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        return [proc.wait(timeout=60) for proc in self._procs]


CpuSnapshot = dict[tuple[str, int], float]


def cpu_snapshot() -> CpuSnapshot:
    """CPU seconds used so far, keyed by (program, pid): every PostgreSQL and RabbitMQ
    process machine-wide, this process, and the machine as a whole (pid 0)."""
    snapshot: CpuSnapshot = {}
    for proc in psutil.process_iter(["name", "cpu_times"]):
        name = proc.info["name"] or ""
        times = proc.info["cpu_times"]
        if times is None:
            continue
        key = (
            "postgres"
            if name.startswith("postgres")
            else ("rabbitmq" if name.startswith("beam") else None)
        )
        if key is not None:
            snapshot[(key, proc.pid)] = times.user + times.system
    machine = psutil.cpu_times()
    snapshot[("machine_busy", 0)] = machine.user + machine.system + machine.nice
    snapshot[("this_process", 0)] = sum(psutil.Process().cpu_times()[:2])
    return snapshot


def cpu_by_program(before: CpuSnapshot, after: CpuSnapshot) -> dict[str, float]:
    """CPU seconds each program used between two snapshots. Per process, so one that
    exits in between (a PostgreSQL backend) never makes a total go down; one that started
    in between counts whole."""
    used = {"postgres": 0.0, "rabbitmq": 0.0, "machine_busy": 0.0, "this_process": 0.0}
    for (program, pid), seconds in after.items():
        used[program] += max(0.0, seconds - before.get((program, pid), 0.0))
    return used


async def cleanup_broker(settings: Settings, prefix: str) -> None:
    """Delete every queue and exchange the bench's broker prefix declared (the names
    come from the topology itself, `declared_names`, so a new work queue is never left
    behind: idle quorum queues keep costing the broker CPU)."""
    queues, exchanges = declared_names(settings.model_copy(update={"broker_prefix": prefix}))
    connection = await aio_pika.connect(settings.rabbitmq_url)
    try:
        channel = await connection.channel()
        for name in queues:
            await channel.queue_delete(name)
        for exchange in exchanges:
            await channel.exchange_delete(exchange)
    finally:
        await connection.close()


async def cleanup_redis(settings: Settings, key_prefix: str) -> int:
    """Delete the keys under the bench's Redis prefix (the gateway emulator remembers
    every charge for 30 days); returns how many."""
    redis = Redis.from_url(settings.redis_url)
    deleted = 0
    try:
        batch: list[bytes] = []
        async for key in redis.scan_iter(match=f"{key_prefix}*", count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += await redis.delete(*batch)
                batch = []
        if batch:
            deleted += await redis.delete(*batch)
    finally:
        await redis.aclose()
    return deleted
