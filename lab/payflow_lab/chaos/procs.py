"""The payflow processes of a chaos run, and the supervisor that keeps them running.

Each role is a real `python -m payflow <role>` subprocess with the run's environment
(`chaos_env`): one API, two relays, two workers, one scheduler, one chain scanner.
`Supervisor.tick()` restarts any process that exited without being told to (as systemd or Kubernetes
would) and counts it; `kill9()` is a fault: SIGKILL to one process, restarted by the
fault after its pause. Only our own children's pids are ever signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from payflow_lab.supervisor import spawn_payflow, stop_processes

ROLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("api", ("api",)),
    ("relay-1", ("relay",)),
    ("relay-2", ("relay",)),
    ("worker-1", ("worker",)),
    ("worker-2", ("worker",)),
    ("scheduler", ("scheduler",)),
    ("scanner", ("scanner",)),
)


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where the children connect: PostgreSQL and RabbitMQ through the proxies."""

    database_url: str
    migration_url: str
    rabbitmq_url: str
    redis_url: str
    api_port: int
    provider_secret: str
    gateway_seed: int
    gateway_failure_rate: float


def chaos_env(points: Endpoints, **extra: str) -> dict[str, str]:
    """The children's environment: short retry tiers, leases and sweeps so a run drains
    in seconds; the local receiver allowed; no rate limit; the machine's ETH_* settings
    dropped (the run's own chain comes in `extra`: ETH_RPC_URL of its private anvil).
    Secrets travel only here, never in logs."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PAYFLOW_", "API_KEY", "ETH_", "ADMIN_API_KEY"))
    }
    env.update(
        DATABASE_URL=points.database_url,
        MIGRATION_DATABASE_URL=points.migration_url,
        RABBITMQ_URL=points.rabbitmq_url,
        REDIS_URL=points.redis_url,
        REDIS_KEY_PREFIX="payflow:",
        BROKER_PREFIX="payflow",
        API_HOST="127.0.0.1",
        API_PORT=str(points.api_port),
        API_WORKERS="1",
        PROVIDER_WEBHOOK_SECRET=points.provider_secret,
        RATE_LIMIT_PER_MINUTE="100000000",
        GATEWAY_DELAY_MIN_S="0",
        GATEWAY_DELAY_MAX_S="0.2",
        GATEWAY_FAILURE_RATE=str(points.gateway_failure_rate),
        GATEWAY_SEED=str(points.gateway_seed),
        CHARGE_LEASE_S="3",
        # A killed worker's redelivered webhook message is dropped while the dead send's
        # lease runs; the webhook sweep re-announces the job WEBHOOK_SWEEP_AFTER_S after
        # the lease's end: a short lease keeps that recovery quick.
        WEBHOOK_LEASE_S="2",
        RETRY_TIERS_MS="1000,2000,4000",
        WEBHOOK_TIMEOUT_S="1",
        WEBHOOK_ALLOW_HOSTS="127.0.0.1",
        RELAY_POLL_INTERVAL_S="1",
        RELAY_RETRY_MAX_BACKOFF_S="5",
        PAYMENT_SWEEP_AFTER_S="10",
        WEBHOOK_SWEEP_AFTER_S="15",
        STALE_EVENT_TIMEOUT_S="10",
        SWEEP_MAX_BACKOFF_S="20",
        SCHEDULER_INTERVAL_S="1",
        DB_POOL_MAX="10",
        METRICS_PORT="0",
        SHUTDOWN_GRACE_S="5",
        LOG_LEVEL=os.environ.get("CHAOS_SERVICE_LOG_LEVEL", "WARNING"),
    )
    env.update(extra)
    return env


@dataclass
class Proc:
    """One role process: its command, the running Popen, and what happened to it."""

    name: str
    args: tuple[str, ...]
    popen: subprocess.Popen[bytes] | None = None
    paused_until: float | None = None  # killed by a fault, restarted after this time
    starts: int = 0
    kills: int = 0
    unplanned_exits: list[int] = field(default_factory=list)
    rss_mb: list[tuple[float, float]] = field(default_factory=list)  # (t, MiB)


class Supervisor:
    """Starts the roles, restarts what dies, kills on request, samples RSS."""

    def __init__(
        self, env: dict[str, str], log_dir: Path, roles: tuple[tuple[str, tuple[str, ...]], ...]
    ) -> None:
        self._env = env
        self._log_dir = log_dir
        self.procs = {name: Proc(name, args) for name, args in roles}

    def _spawn(self, proc: Proc) -> None:
        log_path = self._log_dir / f"{proc.name}.log"
        proc.popen = spawn_payflow(proc.args, self._env, log_path, append=True)
        proc.starts += 1
        proc.paused_until = None

    def start_all(self) -> None:
        """Start every role."""
        for proc in self.procs.values():
            self._spawn(proc)

    def kill9(self, name: str, pause_s: float) -> None:
        """SIGKILL `name` (our child) and restart it after `pause_s` (in `tick`)."""
        proc = self.procs[name]
        if proc.popen is not None and proc.popen.poll() is None:
            proc.popen.send_signal(signal.SIGKILL)
            proc.popen.wait(timeout=10)
        proc.kills += 1
        proc.paused_until = time.monotonic() + pause_s

    def tick(self) -> None:
        """Restart processes whose pause is over and any that exited on their own."""
        now = time.monotonic()
        for proc in self.procs.values():
            if proc.paused_until is not None:
                if now >= proc.paused_until:
                    self._spawn(proc)
                continue
            if proc.popen is not None and proc.popen.poll() is not None:
                proc.unplanned_exits.append(proc.popen.returncode)
                self._spawn(proc)

    def sample_rss(self, t: float) -> None:
        """Record each running process's RSS (MiB) at run time `t`."""
        for proc in self.procs.values():
            if proc.popen is None or proc.popen.poll() is not None:
                continue
            try:
                rss = psutil.Process(proc.popen.pid).memory_info().rss / 2**20
            except psutil.Error:
                continue
            proc.rss_mb.append((t, rss))

    def stop_all(self, grace_s: float = 15.0) -> None:
        """SIGTERM every child, SIGKILL what is left after `grace_s`."""
        running = [p.popen for p in self.procs.values() if p.popen and p.popen.poll() is None]
        stop_processes(running, grace_s)
