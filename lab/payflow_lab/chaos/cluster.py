"""Private PostgreSQL, RabbitMQ and Redis for a chaos run, on free ports in one temp dir.

Nothing here touches the machine's shared services: each server gets its own data
directory, its own ports (RabbitMQ also its own node name, distribution port and Erlang
cookie through a private HOME) and is stopped at the end. PostgreSQL refuses to run as
root, so as root it runs as the `postgres` OS user (the temp dir is handed to it).

PostgreSQL runs with `fsync=off`: a restart (`pg_ctl restart -m immediate`, a crash and
crash recovery) kills the server process, not the machine, so the OS page cache keeps
what was written; an OS crash is not part of the fault model (docs/reliability.md).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from payflow_lab.ports import free_port

PG_BIN = Path(os.environ.get("CHAOS_PG_BIN", "/usr/lib/postgresql/15/bin"))
RABBIT_BIN = Path(os.environ.get("CHAOS_RABBIT_BIN", "/usr/lib/rabbitmq/bin"))
START_LIMIT_S = 90.0


class ClusterError(RuntimeError):
    """A private service did not start or stop; the message names it."""


class Guard:
    """Serialises a service's start and its final stop across threads: a fault thread
    restarting the service while the run tears down (Ctrl-C mid-restart) either finishes
    first and is then stopped, or finds the service closed and starts nothing."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.closed = False

    @contextmanager
    def starting(self, what: str) -> Iterator[None]:
        """Hold the lock for a start; `ClusterError` once the service is closed."""
        with self._lock:
            if self.closed:
                raise ClusterError(f"{what} is closed: the run is tearing down")
            yield

    @contextmanager
    def closing(self) -> Iterator[None]:
        """Mark closed (after any start in progress) and hold the lock for the stop."""
        with self._lock:
            self.closed = True
            yield


def port_open(port: int) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:`port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait(check: object, what: str, limit_s: float = START_LIMIT_S) -> None:
    deadline = time.monotonic() + limit_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise ClusterError(f"{what} did not come up in {limit_s:.0f} s")
        time.sleep(0.1)


def _pg_user() -> str | None:
    """The OS user PostgreSQL runs as: `postgres` when we are root, else ourselves."""
    return "postgres" if os.geteuid() == 0 else None


@dataclass
class PrivatePostgres:
    """One PostgreSQL cluster (initdb) in `root/pg`, on `port`, trust auth on 127.0.0.1."""

    root: Path
    guard: Guard = field(default_factory=Guard, repr=False)
    port: int = field(default_factory=free_port)

    @property
    def data(self) -> Path:
        return self.root / "pg" / "data"

    @property
    def superuser(self) -> str:
        return _pg_user() or pwd.getpwuid(os.geteuid()).pw_name

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(  # noqa: S603 - fixed binaries, our own arguments
            [str(PG_BIN / args[0]), *args[1:]],
            user=_pg_user(),
            capture_output=True,
            check=check,
            timeout=START_LIMIT_S,
        )

    def init(self) -> None:
        """initdb and start."""
        (self.root / "pg").mkdir(parents=True)
        if _pg_user() is not None:
            account = pwd.getpwnam("postgres")
            os.chown(self.root / "pg", account.pw_uid, account.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", self.superuser, "-E", "UTF8")
        options = {
            "port": str(self.port),
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.root / 'pg'}'",
            "fsync": "off",
            "full_page_writes": "off",
            "max_connections": "300",
            "shared_buffers": "128MB",
        }
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in options.items())
        self.start()

    def start(self) -> None:
        """pg_ctl start and wait until it accepts connections."""
        with self.guard.starting("private PostgreSQL"):
            log = str(self.root / "pg" / "server.log")
            self._run("pg_ctl", "-D", str(self.data), "-l", log, "-w", "-t", "60", "start")
            _wait(lambda: port_open(self.port), "private PostgreSQL")

    def restart(self) -> None:
        """A crash (`-m immediate`) and a start: crash recovery, every session cut."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        self.start()

    def stop(self) -> None:
        """Fast shutdown (ignores a server that is already down)."""
        if self.data.exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)


@dataclass
class PrivateRabbit:
    """One RabbitMQ node with its own name, ports, mnesia and cookie (private HOME)."""

    root: Path
    guard: Guard = field(default_factory=Guard, repr=False)
    port: int = field(default_factory=free_port)
    dist_port: int = field(default_factory=free_port)
    node: str = field(default_factory=lambda: f"chaos{os.getpid()}_{free_port()}@localhost")
    _proc: subprocess.Popen[bytes] | None = None

    def _env(self) -> dict[str, str]:
        base = self.root / "rabbit"
        return {
            **os.environ,
            "HOME": str(base),
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "advanced.config"),
            # a node that fails to boot writes its crash dump here, not into the caller's cwd
            "ERL_CRASH_DUMP": str(base / "erl_crash.dump"),
        }

    def init(self) -> None:
        """Create the directories (no plugins) and start."""
        base = self.root / "rabbit"
        for sub in ("mnesia", "log"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        (base / "enabled_plugins").write_text("[].\n")
        self.start()

    def start(self) -> None:
        """Start the node and wait until its AMQP port accepts connections."""
        with self.guard.starting("private RabbitMQ"):
            log = (self.root / "rabbit" / "server.out").open("ab")
            self._proc = subprocess.Popen(  # noqa: S603 - fixed binary
                [str(RABBIT_BIN / "rabbitmq-server")],
                env=self._env(),
                cwd=self.root / "rabbit",
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()  # the child holds its own copy
            _wait(lambda: port_open(self.port), "private RabbitMQ")

    def stop(self) -> None:
        """`rabbitmqctl -n <node> stop`, then make sure the server process is gone."""
        subprocess.run(  # noqa: S603 - fixed binary
            [str(RABBIT_BIN / "rabbitmqctl"), "-n", self.node, "stop"],
            env=self._env(),
            capture_output=True,
            check=False,
            timeout=START_LIMIT_S,
        )
        if self._proc is not None:
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(timeout=10)
            self._proc = None

    def restart(self) -> None:
        """A clean stop and a start (quorum queues and their messages survive)."""
        self.stop()
        self.start()


@dataclass
class PrivateRedis:
    """One redis-server on `port`; its data survives a down window (SHUTDOWN SAVE + RDB)."""

    root: Path
    guard: Guard = field(default_factory=Guard, repr=False)
    port: int = field(default_factory=free_port)
    _proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start and wait for the port."""
        with self.guard.starting("private Redis"):
            base = self.root / "redis"
            base.mkdir(parents=True, exist_ok=True)
            log = (base / "server.log").open("ab")
            self._proc = subprocess.Popen(  # noqa: S603 - fixed binary
                [
                    shutil.which("redis-server") or "redis-server",
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(base),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()  # the child holds its own copy
            _wait(lambda: port_open(self.port), "private Redis")

    def down(self) -> None:
        """SHUTDOWN SAVE: clients see a refused connection until `start`; data is kept."""
        subprocess.run(  # noqa: S603 - fixed binary
            [shutil.which("redis-cli") or "redis-cli", "-p", str(self.port), "shutdown", "save"],
            capture_output=True,
            check=False,
            timeout=30,
        )
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
            self._proc = None

    stop = down


@dataclass
class Cluster:
    """The three private services under one temp dir; `stop()` stops all and removes it."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="payflow-chaos-")))
    pg: PrivatePostgres = field(init=False)
    rabbit: PrivateRabbit = field(init=False)
    redis: PrivateRedis = field(init=False)
    keep: bool = False

    def __post_init__(self) -> None:
        os.chmod(self.root, 0o755)  # noqa: S103 - PostgreSQL's OS user must reach its subdir
        self.pg = PrivatePostgres(self.root)
        self.rabbit = PrivateRabbit(self.root)
        self.redis = PrivateRedis(self.root)

    def start(self) -> None:
        """initdb + start PostgreSQL, start RabbitMQ and Redis."""
        self.pg.init()
        self.rabbit.init()
        self.redis.start()

    def stop(self) -> None:
        """Stop every service that runs (errors are swallowed: this runs on failure too)."""
        for service in (self.redis, self.rabbit, self.pg):
            try:
                with service.guard.closing():
                    service.stop()
            except (OSError, subprocess.SubprocessError, ClusterError):
                pass
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)
