"""Starting and stopping payflow's role processes: the one place the harness and the
tests run `python -m payflow <role>` as an OS process and take it down again.

`spawn_payflow` starts one role with this interpreter, its stdout and stderr in a log
file; `stop_process` and `stop_processes` end processes the caller started (SIGTERM, a
grace period for the role's own shutdown, then SIGKILL). Only the given children's pids
are ever signalled.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

KILL_WAIT_S = 10.0  # a SIGKILLed process is reaped well within this


def spawn_payflow(
    args: Sequence[str],
    env: Mapping[str, str],
    log_path: Path,
    *,
    cwd: Path | None = None,
    append: bool = False,
) -> subprocess.Popen[bytes]:
    """Start `python -m payflow *args` (this interpreter) with exactly `env` as its
    environment, in `cwd` (None: this process's), stdout and stderr both written to
    `log_path` (appended to when `append`, e.g. a restarted role; else truncated).

    Returns the running process; the caller stops it (`stop_process`)."""
    with log_path.open("ab" if append else "wb") as log:
        return subprocess.Popen(  # noqa: S603 - our own interpreter and payflow's CLI
            [sys.executable, "-m", "payflow", *args],
            cwd=cwd,
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def stop_process(process: subprocess.Popen[bytes], grace_s: float = 30.0) -> int:
    """SIGTERM `process` if it still runs, wait up to `grace_s` seconds for it to exit,
    SIGKILL it if it has not. Returns its exit code (negative: the signal that ended it)."""
    return stop_processes([process], grace_s)[0]


def stop_processes(processes: Iterable[subprocess.Popen[bytes]], grace_s: float) -> list[int]:
    """SIGTERM every process that still runs, all at once, then wait for them within one
    shared `grace_s`-second deadline; SIGKILL whatever is left then. Returns the exit
    codes in the order given."""
    processes = list(processes)
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + grace_s
    codes = []
    for process in processes:
        try:
            codes.append(process.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            process.kill()
            codes.append(process.wait(timeout=KILL_WAIT_S))
    return codes
