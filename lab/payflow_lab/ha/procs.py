"""Processes of the HA lab: started inside a host's namespace, logged to a file, and
always ended (the harness keeps every `Popen` it started; nothing is killed by name).

`kill9_host` is the fault: SIGKILL to every process in one namespace, found with
`ip netns pids`, i.e. exactly the processes the lab started on that host.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from payflow_lab.ha.netns import IP, Host


class LabError(RuntimeError):
    """A lab service did not start; the message names it and its log."""


def run_in(
    host: Host,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log: Path,
    user: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` in `host`'s namespace (as `user` when given), output to `log`."""
    command = list(argv)
    if user is not None:
        command = ["runuser", "-u", user, "--", "env", *[f"{k}={v}" for k, v in env.items()]]
        command += list(argv)
    with log.open("ab") as out:
        return subprocess.Popen(  # noqa: S603 - the lab's own commands
            host.argv(command),
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def run_once(
    host: Host,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log: Path,
    user: str | None = None,
    timeout_s: float = 120.0,
) -> None:
    """Run `argv` in `host`'s namespace to completion; `LabError` when it fails."""
    process = run_in(host, argv, env=env, log=log, user=user)
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        raise LabError(
            f"{argv[0]} on {host.netns} took over {timeout_s:.0f}s (see {log})"
        ) from None
    if code != 0:
        raise LabError(f"{' '.join(argv[:3])} on {host.netns} exited {code} (see {log})")


def host_pids(host: Host) -> list[int]:
    """The pids of every process in `host`'s namespace."""
    out = subprocess.run(  # noqa: S603 - fixed binary
        [IP, "netns", "pids", host.netns], capture_output=True, text=True, check=False
    ).stdout
    return [int(pid) for pid in out.split() if pid.isdigit()]


def kill9_host(host: Host, match: Callable[[int], bool] | None = None) -> list[int]:
    """SIGKILL the processes in `host`'s namespace (those `match` accepts, or all);
    returns their pids."""
    killed = []
    for pid in host_pids(host):
        if match is None or match(pid):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
    return killed


def stop(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM `process`'s session, SIGKILL it after `grace_s`."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)


def port_check(address: str, port: int) -> Callable[[], bool]:
    """A check for `wait_for`: `address:port` accepts connections."""
    return functools.partial(port_open, address, port)


def port_open(address: str, port: int, timeout_s: float = 0.5) -> bool:
    """True when `address:port` accepts a TCP connection now."""
    try:
        with socket.create_connection((address, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def wait_for(check: Callable[[], bool], what: str, limit_s: float = 90.0) -> float:
    """Poll `check` until true; the seconds it took, or `LabError` naming `what`."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > limit_s:
            raise LabError(f"{what} not ready after {limit_s:.0f}s")
        time.sleep(0.1)
    return time.monotonic() - started
