"""PostgreSQL with automatic failover for the HA lab: a pg_auto_failover formation of
one monitor and two data nodes, each on its own host (namespace).

pg_auto_failover (Debian's `postgresql-15-auto-failover`) runs a `pg_autoctl` keeper
beside each PostgreSQL and a monitor that holds the formation's state machine. With two
data nodes the standby is in the primary's `synchronous_standby_names`
(`ANY 1 (pgautofailover_standby_2)`, `synchronous_commit = on`): a commit returns only
once the standby has it, so a promoted standby holds every answered write (RPO 0).
When the standby is lost the primary goes to `wait_primary` and stops waiting for it
(availability first); a second failure in that window is not covered.

The monitor's health checks are shortened for the lab (1 s period, 3 s to unhealthy,
5 s demote timeout) so a failover takes seconds; production keeps the defaults or
tunes them to its network. Every server listens on its host's own port (the unix
socket lock files in /var/run/postgresql are shared by all namespaces, so the ports
differ) and runs as the `postgres` OS user; pg_hba trusts the lab's subnet.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from payflow_lab.ha.netns import SUBNET, Host
from payflow_lab.ha.procs import port_check, run_in, run_once, stop, wait_for

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_AUTOCTL = Path("/usr/bin/pg_autoctl")
SOCKET_DIR = Path("/var/run/postgresql")
MONITOR_PORT = 25441
DATA_PORTS = (25442, 25443)
DATABASE = "payflow"
# The monitor's timings for the lab (milliseconds); the defaults are 5000/5000/2/2000/20000/30000.
MONITOR_TUNING = {
    "pgautofailover.health_check_period": 1000,
    "pgautofailover.health_check_timeout": 1000,
    "pgautofailover.health_check_max_retries": 1,
    "pgautofailover.health_check_retry_delay": 500,
    "pgautofailover.node_considered_unhealthy_timeout": 3000,
    "pgautofailover.primary_demote_timeout": 5000,
}


def missing_binaries() -> list[str]:
    """The Debian packages whose binaries this module needs and that are absent."""
    missing = []
    if not (PG_BIN / "postgres").exists():
        missing.append("postgresql-15")
    if not PG_AUTOCTL.exists():
        missing.append("postgresql-15-auto-failover")
    return missing


@dataclass
class Formation:
    """The monitor and the data nodes: `start()` builds and runs them, `close()` stops."""

    root: Path
    monitor: Host
    nodes: tuple[Host, ...]
    _keepers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        os.chown(self.root, *_postgres_ids())

    def port_of(self, host: Host) -> int:
        """The PostgreSQL port of `host` (the monitor or a data node)."""
        if host == self.monitor:
            return MONITOR_PORT
        return DATA_PORTS[self.nodes.index(host)]

    def _env(self, host: Host) -> dict[str, str]:
        base = self.root / host.name
        return {
            "PATH": f"{PG_BIN}:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(self.root),
            "XDG_CONFIG_HOME": str(base / "config"),
            "XDG_DATA_HOME": str(base / "share"),
            "XDG_RUNTIME_DIR": str(base / "run"),
            "LANG": "C.UTF-8",
        }

    def _pgdata(self, host: Host) -> Path:
        return self.root / host.name / "pgdata"

    @property
    def monitor_url(self) -> str:
        """The monitor's database, as the nodes' keepers reach it."""
        return (
            f"postgres://autoctl_node@{self.monitor.address}:{MONITOR_PORT}"
            "/pg_auto_failover?sslmode=disable"
        )

    def dsn(self, user: str = "postgres", database: str = DATABASE) -> str:
        """The multi-host DSN of the data nodes, writable session only."""
        hosts = ",".join(f"{h.address}:{self.port_of(h)}" for h in self.nodes)
        return f"postgresql://{user}@{hosts}/{database}?target_session_attrs=read-write"

    def node_url(self, host: Host, user: str = "postgres", database: str = DATABASE) -> str:
        """One data node's URL (any session)."""
        return f"postgresql://{user}@{host.address}:{self.port_of(host)}/{database}"

    def start(self) -> None:
        """Create and run the monitor, then each data node in turn (the first becomes the
        primary, the next ones clone it); returns once every node is up."""
        _remove_sockets()
        self._create(self.monitor, ["create", "monitor", "--auth", "trust", "--no-ssl"])
        self._tune_monitor_before_run()
        self._run(self.monitor)
        wait_for(port_check(self.monitor.address, MONITOR_PORT), "pg_auto_failover monitor")
        for node in self.nodes:
            self._create(
                node,
                [
                    "create",
                    "postgres",
                    "--auth",
                    "trust",
                    "--no-ssl",
                    "--name",
                    node.name,
                    "--dbname",
                    DATABASE,
                    "--monitor",
                    self.monitor_url,
                ],
            )
            with (self._pgdata(node) / "pg_hba.conf").open("a") as hba:
                hba.write(f"host all all {SUBNET}.0/24 trust\n")
            self._run(node)
            wait_for(port_check(node.address, self.port_of(node)), f"PostgreSQL {node.name}")

    def _create(self, host: Host, args: list[str]) -> None:
        for sub in ("config", "share", "run"):
            path = self.root / host.name / sub
            path.mkdir(parents=True, exist_ok=True)
            os.chown(path, *_postgres_ids())
        os.chown(self.root / host.name, *_postgres_ids())
        argv = [
            str(PG_AUTOCTL), *args, "--pgdata", str(self._pgdata(host)),
            "--pgport", str(self.port_of(host)), "--hostname", host.address,
        ]  # fmt: skip
        log = self.root / f"{host.name}.create.log"
        run_once(host, argv, env=self._env(host), log=log, user="postgres", timeout_s=180)

    def _tune_monitor_before_run(self) -> None:
        lines = "".join(f"{name} = {value}\n" for name, value in MONITOR_TUNING.items())
        with (self._pgdata(self.monitor) / "postgresql.auto.conf").open("a") as conf:
            conf.write(lines)

    def _run(self, host: Host) -> None:
        argv = [str(PG_AUTOCTL), "run", "--pgdata", str(self._pgdata(host))]
        log = self.root / f"{host.name}.log"
        self._keepers[host.name] = run_in(host, argv, env=self._env(host), log=log, user="postgres")

    def states(self) -> dict[str, tuple[str, str]]:
        """Each data node's (reported, assigned) state, as the monitor holds them."""
        out = subprocess.run(  # noqa: S603 - fixed binary, the lab's own arguments
            [
                str(PG_BIN / "psql"), self.monitor_url, "-AtF", "|", "-c",
                "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node",
            ],
            capture_output=True, text=True, timeout=10, check=False,
        ).stdout  # fmt: skip
        rows = (line.split("|") for line in out.splitlines() if line.count("|") == 2)
        return {name: (reported, goal) for name, reported, goal in rows}

    def wait_replicating(self, limit_s: float = 120.0) -> float:
        """Wait until one node is `primary` and another `secondary` (synchronous
        replication on); the seconds it took."""

        def ready() -> bool:
            reported = sorted(state for state, _goal in self.states().values())
            return reported == ["primary", "secondary"]

        return wait_for(ready, "a primary with a synchronous secondary", limit_s)

    def primary(self) -> Host | None:
        """The data node the monitor reports as `primary` or `wait_primary` (None: none)."""
        states = self.states()
        for node in self.nodes:
            if states.get(node.name, ("", ""))[0] in ("primary", "wait_primary"):
                return node
        return None

    def restart(self, host: Host) -> None:
        """Run `host`'s keeper again after a fault (its PostgreSQL comes back with it and
        the monitor makes it a standby of whichever node is primary now)."""
        old = self._keepers.pop(host.name, None)
        if old is not None:
            stop(old, grace_s=5)
        _remove_sockets(self.port_of(host))
        self._run(host)

    def keeper(self, host: Host) -> subprocess.Popen[bytes] | None:
        """The `pg_autoctl run` process the lab started on `host`."""
        return self._keepers.get(host.name)

    def close(self) -> None:
        """Stop every keeper (and so its PostgreSQL); the namespaces' teardown kills
        whatever is left."""
        for process in self._keepers.values():
            stop(process, grace_s=10)
        self._keepers.clear()
        _remove_sockets()


def _postgres_ids() -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam("postgres")
    return entry.pw_uid, entry.pw_gid


def _remove_sockets(*ports: int) -> None:
    """The lab's stale unix sockets and lock files (a kill -9 leaves them behind), of
    `ports` (default: every port of the lab)."""
    for port in ports or (MONITOR_PORT, *DATA_PORTS):
        for suffix in ("", ".lock"):
            path = SOCKET_DIR / f".s.PGSQL.{port}{suffix}"
            path.unlink(missing_ok=True)
