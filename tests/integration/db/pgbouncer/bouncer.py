"""A private PgBouncer process for the test run: transaction pooling, its own port,
config and auth file in a temporary directory. Never touches a system PgBouncer."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from payflow_lab.ports import free_port

# Few server connections per (database, user): more clients than servers, so every
# test really shares server connections between transactions.
POOL_SIZE = 4
START_TIMEOUT_S = 60.0  # generous: the suite runs several files at once on two cores
PR_SET_PDEATHSIG = 1


def find_pgbouncer() -> str:
    """The pgbouncer binary (Debian puts it in /usr/sbin, often not on a user's PATH)."""
    found = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None
    )
    if found is None:
        raise RuntimeError(
            "pgbouncer is not installed: `make pgbouncer` (Debian package `pgbouncer`)"
        )
    return found


def _die_with_parent_hook() -> Callable[[], None]:
    """A `preexec_fn` that, in the child after the user switch, asks Linux to SIGTERM it
    when the test run dies (`prctl(PR_SET_PDEATHSIG)`), so a killed pytest leaves no
    pgbouncer behind. libc is loaded here, in the parent: the child only calls it."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    prctl = libc.prctl

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    return hook


def _config(port: int, auth_file: Path, server_port: int) -> str:
    lines = [
        "[databases]",
        # Every database name maps to the same-named database on the shared server, so
        # the per-test databases need no entry of their own.
        f"* = host=127.0.0.1 port={server_port}",
        "",
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        f"listen_port = {port}",
        "unix_socket_dir =",
        "pool_mode = transaction",
        "auth_type = scram-sha-256",
        f"auth_file = {auth_file}",
        f"default_pool_size = {POOL_SIZE}",
        "reserve_pool_size = 0",
        "max_client_conn = 500",
        # A starved pool fails a test within the test's own limits instead of hanging.
        "query_wait_timeout = 30",
        "server_lifetime = 3600",
        "server_idle_timeout = 60",
        "log_connections = 0",
        "log_disconnections = 0",
    ]
    return "\n".join(lines) + "\n"


@dataclass
class PgBouncer:
    """One running pgbouncer; `url(user, password, database)` reaches a database through it."""

    workdir: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    def url(self, user: str, password: str, database: str) -> str:
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{database}"

    @classmethod
    def start(cls, workdir: Path, users: dict[str, str], server_port: int = 5432) -> PgBouncer:
        """Write config and auth file into `workdir` and start pgbouncer on a free port.

        `users` maps a login to its password (the auth file; pgbouncer checks it with
        SCRAM and then logs in to PostgreSQL as that user). Raises RuntimeError with
        pgbouncer's log when it does not come up.
        """
        binary = find_pgbouncer()
        run_as = "postgres" if os.geteuid() == 0 else None
        auth_file = workdir / "userlist.txt"
        auth_file.write_text("".join(f'"{user}" "{pw}"\n' for user, pw in users.items()))
        auth_file.chmod(0o600)
        last_error = ""
        for _ in range(5):  # a free port can be taken between probe and bind
            port = free_port()
            ini = workdir / "pgbouncer.ini"
            ini.write_text(_config(port, auth_file, server_port))
            if run_as:
                uid = pwd.getpwnam(run_as).pw_uid
                for path in (workdir, ini, auth_file):
                    os.chown(path, uid, -1)
            log_path = workdir / f"pgbouncer-{port}.log"
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    [binary, str(ini)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    # pgbouncer refuses to run as root: start it as `postgres` then.
                    user=run_as,
                    group=pwd.getpwnam(run_as).pw_gid if run_as else None,
                    extra_groups=[] if run_as else None,
                    preexec_fn=_die_with_parent_hook(),
                )
            bouncer = cls(workdir, port, process)
            if bouncer._wait_ready():
                return bouncer
            bouncer.stop()
            last_error = log_path.read_text(errors="replace")
        raise RuntimeError(f"pgbouncer did not start:\n{last_error}")

    def _wait_ready(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return True
            except OSError:
                time.sleep(0.05)
        return False

    def restart(self) -> None:
        """Stop this pgbouncer (SIGTERM: an immediate shutdown that drops every client
        and server connection, transactions in flight included) and start it again on
        the same port with the same config, as an operator's restart does. Raises
        RuntimeError when it does not come back."""
        self.stop()
        run_as = "postgres" if os.geteuid() == 0 else None
        log_path = self.workdir / f"pgbouncer-{self.port}.log"
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [find_pgbouncer(), str(self.workdir / "pgbouncer.ini")],
                stdout=log,
                stderr=subprocess.STDOUT,
                user=run_as,
                group=pwd.getpwnam(run_as).pw_gid if run_as else None,
                extra_groups=[] if run_as else None,
                preexec_fn=_die_with_parent_hook(),
            )
        if not self._wait_ready():
            raise RuntimeError(f"pgbouncer did not restart:\n{log_path.read_text()}")

    def stop(self) -> None:
        """Stop this process only (SIGTERM, then SIGKILL after 10 s)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
