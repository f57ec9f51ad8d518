"""The HA lab's whole topology: hosts made of network namespaces, PostgreSQL with
automatic failover, a RabbitMQ cluster, Redis, HAProxy and payflow's roles spread over
their own hosts.

```
10.77.0.0/24 on bridge pf-br0 (root namespace: .1, the harness and the tests)
  pf-mon .10  pg_auto_failover monitor      pf-mq1..3 .21-.23  RabbitMQ cluster
  pf-pg1 .11  PostgreSQL + pg_autoctl       pf-redis  .70      Redis
  pf-pg2 .12  PostgreSQL + pg_autoctl       pf-haproxy .40     HAProxy :8080 -> api1, api2
  pf-api1 .31, pf-api2 .32  payflow api     pf-wk1 .51, pf-wk2 .52  payflow worker
  pf-relay .61  payflow relay               pf-sched .62  payflow scheduler
```

`Lab` is a context manager: on entry it cleans leftovers and builds everything (the
formation and the broker cluster in parallel), on exit (also on an exception or Ctrl-C,
and at interpreter exit) it stops every process and removes every namespace. `timings`
records how long each part took to come up.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

from payflow_lab.ha import mq, pg
from payflow_lab.ha.netns import Host, Network, check_available
from payflow_lab.ha.procs import LabError, port_check, run_in, stop, wait_for

API_PORT = 8000
HAPROXY_PORT = 8080
REDIS_PORT = 6379
API_KEY = "ha-lab-api-key-0123456789"
ADMIN_KEY = "ha-lab-admin-key-0123456789"
PROVIDER_SECRET = "ha-lab-provider-secret-0123456789abcdef"  # noqa: S105 - lab only
LOCK_PATH = Path("/run/lock/payflow-ha-lab.lock")
ROLE_HOSTS: dict[str, tuple[str, int]] = {
    "api1": ("api", 31),
    "api2": ("api", 32),
    "wk1": ("worker", 51),
    "wk2": ("worker", 52),
    "relay": ("relay", 61),
    "sched": ("scheduler", 62),
}


class LabBusy(RuntimeError):
    """Another HA lab is running on this machine."""


def missing_tools() -> list[str]:
    """The Debian packages the lab needs that are not installed (`make ha-lab`)."""
    missing = pg.missing_binaries() + mq.missing_binaries()
    if not Path("/usr/sbin/haproxy").exists():
        missing.append("haproxy")
    if shutil.which("redis-server") is None:
        missing.append("redis-server")
    return missing


def unavailable_reason() -> str | None:
    """Why the lab cannot run here (one line), or None when it can."""
    if os.geteuid() != 0:
        return "the HA lab needs root (network namespaces)"
    missing = missing_tools()
    if missing:
        return f"the HA lab needs {', '.join(missing)} (make ha-lab)"
    try:
        check_available()
    except RuntimeError as exc:
        return str(exc)
    return None


@dataclass
class Lab:
    """The running topology; see the module's docstring."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="pf-ha-")))
    keep: bool = False
    net: Network = field(default_factory=Network)
    timings: dict[str, float] = field(default_factory=dict)
    formation: pg.Formation | None = None
    rabbit: mq.RabbitCluster | None = None
    roles: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # What a run adds: settings over `env()`'s, and role hosts beside ROLE_HOSTS
    # (name -> (role, octet)), such as a scanner host for a chain.
    extra_env: dict[str, str] = field(default_factory=dict)
    extra_roles: dict[str, tuple[str, int]] = field(default_factory=dict)
    _services: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _closed: bool = False
    _lock: IO[str] | None = None

    @property
    def role_hosts(self) -> dict[str, tuple[str, int]]:
        """Every payflow role host: name -> (role, last octet of its address)."""
        return {**ROLE_HOSTS, **self.extra_roles}

    def host(self, name: str) -> Host:
        """The host `pf-<name>`."""
        return self.net.hosts[name]

    def __enter__(self) -> Lab:
        # One lab per machine: its names, subnet and ports are fixed, and its start
        # removes every `pf-` namespace; a second run refuses instead of tearing down the
        # first.
        LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
        self._lock = LOCK_PATH.open("w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            self._closed = True  # `close()` must never tear down the lab that holds it
            if not self.keep:
                shutil.rmtree(self.root, ignore_errors=True)
            raise LabBusy(f"another HA lab runs on this machine (holds {LOCK_PATH})") from None
        atexit.register(self.close)
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> None:
        """Build the network, the services and the roles, timing each part."""
        started = time.monotonic()
        self.root.chmod(0o755)  # the postgres OS user works below it
        self.net.open()
        for name, octet in [("mon", 10), ("pg1", 11), ("pg2", 12), ("redis", 70), ("haproxy", 40)]:
            self.net.add(name, octet)
        mq_hosts = tuple(self.net.add(f"mq{i}", 20 + i) for i in (1, 2, 3))
        for name, (_role, octet) in self.role_hosts.items():
            self.net.add(name, octet)
        names = {h.netns: h.address for h in mq_hosts}
        for host in mq_hosts:
            self.net.write_hosts_file(host, names)
        self.timings["network_s"] = time.monotonic() - started
        self.formation = pg.Formation(
            self.root / "pg", self.host("mon"), (self.host("pg1"), self.host("pg2"))
        )
        self.rabbit = mq.RabbitCluster(self.root / "mq", mq_hosts)
        self._parallel(
            {"postgres_s": self.formation.start, "rabbitmq_s": self.rabbit.start}, started
        )
        self._start_redis()
        self._migrate()
        self.formation.wait_replicating()
        self.timings["replicating_s"] = time.monotonic() - started
        self.timings["services_s"] = time.monotonic() - started
        for name in self.role_hosts:
            self.start_role(name)
        for name in ("api1", "api2"):
            wait_for(port_check(self.host(name).address, API_PORT), f"payflow api {name}")
        self._start_haproxy()
        wait_for(port_check(self.host("haproxy").address, HAPROXY_PORT), "HAProxy")
        self.timings["total_s"] = time.monotonic() - started

    def _parallel(self, steps: dict[str, object], started: float) -> None:
        errors: list[BaseException] = []

        def run(name: str, step: object) -> None:
            try:
                step()  # type: ignore[operator]
                self.timings[name] = time.monotonic() - started
            except BaseException as exc:  # reported below, after both steps ended
                errors.append(exc)

        threads = [threading.Thread(target=run, args=item) for item in steps.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    @property
    def redis_url(self) -> str:
        """Redis, on its own host."""
        return f"redis://{self.host('redis').address}:{REDIS_PORT}/0"

    @property
    def api_url(self) -> str:
        """The API through HAProxy, as a client in the root namespace reaches it."""
        return f"http://{self.host('haproxy').address}:{HAPROXY_PORT}"

    def env(self) -> dict[str, str]:
        """Every role's environment: the multi-host DSN, the broker list, the lab's keys."""
        assert self.formation is not None and self.rabbit is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PAYFLOW_", "ETH_"))}
        env.update(
            DATABASE_URL=self.formation.dsn(user="payflow_app"),
            MIGRATION_DATABASE_URL=self.formation.dsn(user="postgres"),
            RABBITMQ_URLS=",".join(self.rabbit.urls()),
            RABBITMQ_URL=self.rabbit.urls()[0],
            REDIS_URL=self.redis_url,
            API_HOST="0.0.0.0",  # noqa: S104 - inside its own namespace, behind HAProxy
            API_PORT=str(API_PORT),
            API_WORKERS="1",
            API_KEY=API_KEY,
            ADMIN_API_KEY=ADMIN_KEY,
            PROVIDER_WEBHOOK_SECRET=PROVIDER_SECRET,
            RATE_LIMIT_PER_MINUTE="100000000",
            GATEWAY_DELAY_MIN_S="0",
            GATEWAY_DELAY_MAX_S="0.05",
            GATEWAY_FAILURE_RATE="0",
            RELAY_POLL_INTERVAL_S="1",
            RELAY_RETRY_MAX_BACKOFF_S="5",
            SCHEDULER_INTERVAL_S="1",
            PAYMENT_SWEEP_AFTER_S="10",
            DB_POOL_MAX="10",
            METRICS_PORT="0",
            SHUTDOWN_GRACE_S="5",
            BROKER_CONNECT_TIMEOUT_S="3",
            LOG_LEVEL=os.environ.get("HA_LAB_LOG_LEVEL", "WARNING"),
        )
        env.update(self.extra_env)
        return env

    def start_role(self, name: str) -> None:
        """Start (or restart) the payflow role of host `name`."""
        role, _octet = self.role_hosts[name]
        old = self.roles.pop(name, None)
        if old is not None:  # killed by a fault: reaped before its successor starts
            stop(old, grace_s=5)
        log = self.root / f"{name}.log"
        argv = [sys.executable, "-m", "payflow", role]
        self.roles[name] = run_in(self.host(name), argv, env=self.env(), log=log)

    def _migrate(self) -> None:
        env = self.env()
        done = subprocess.run(
            [sys.executable, "-m", "payflow", "migrate"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            raise LabError(f"payflow migrate failed: {done.stdout[-500:]}{done.stderr[-1500:]}")

    def _start_redis(self) -> None:
        host = self.host("redis")
        argv = [
            "redis-server", "--bind", "0.0.0.0",  # noqa: S104 - own namespace
            "--port", str(REDIS_PORT), "--save", "",
            "--appendonly", "no", "--protected-mode", "no", "--dir", str(self.root),
        ]  # fmt: skip
        self._services.append(run_in(host, argv, env=dict(os.environ), log=self.root / "redis.log"))
        wait_for(port_check(host.address, REDIS_PORT), "Redis")

    def _start_haproxy(self) -> None:
        servers = "\n".join(
            f"  server {name} {self.host(name).address}:{API_PORT} check inter 500 fall 2 rise 1"
            for name in ("api1", "api2")
        )
        config = self.root / "haproxy.cfg"
        config.write_text(
            "global\n  maxconn 4000\n"
            "defaults\n  mode http\n  timeout connect 2s\n  timeout client 30s\n"
            "  timeout server 30s\n  retries 2\n  option redispatch\n"
            f"frontend api\n  bind 0.0.0.0:{HAPROXY_PORT}\n  default_backend apis\n"
            "backend apis\n  balance roundrobin\n  option httpchk\n"
            f"  http-check send meth GET uri /health hdr X-API-Key {API_KEY}\n{servers}\n"
        )
        argv = ["/usr/sbin/haproxy", "-db", "-f", str(config)]
        log = self.root / "haproxy.log"
        self._services.append(run_in(self.host("haproxy"), argv, env=dict(os.environ), log=log))

    def close(self) -> None:
        """Stop every role and service and remove every namespace (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for process in self.roles.values():
            stop(process, grace_s=5)
        for process in self._services:
            stop(process, grace_s=5)
        for part in (self.rabbit, self.formation):
            if part is not None:
                try:
                    part.close()
                except Exception as exc:  # teardown goes on; the namespaces go below
                    print(f"ha lab: closing {type(part).__name__}: {exc}", file=sys.stderr)
        self.net.close()
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)
        if self._lock is not None:
            self._lock.close()  # releases the machine's lab lock
