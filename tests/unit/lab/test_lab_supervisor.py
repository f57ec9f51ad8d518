"""payflow_lab.supervisor: a payflow role process started with its log, and stopped
with SIGTERM, or SIGKILL once the grace period is over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from payflow_lab.supervisor import spawn_payflow, stop_process, stop_processes

IGNORES_SIGTERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)


def _sleeper(code: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stdout.readline() == b"ready\n"  # its handlers are installed
    process.stdout.close()
    return process


def test_spawn_payflow_runs_the_cli_with_the_given_env_and_log(tmp_path: Path) -> None:
    log = tmp_path / "help.log"
    log.write_text("before\n")
    env = {**os.environ, "COLUMNS": "200"}
    process = spawn_payflow(["--help"], env, log, cwd=tmp_path)
    assert process.wait(timeout=60) == 0
    text = log.read_text()
    assert "before" not in text  # truncated, not appended
    assert "Usage:" in text and "migrate" in text

    again = spawn_payflow(["bench", "--help"], env, log, append=True)
    assert again.wait(timeout=60) == 0
    text = log.read_text()
    assert text.count("Usage:") == 2 and "ledger" in text


def test_stop_process_terminates_and_kills_what_ignores_sigterm() -> None:
    polite = _sleeper("import time\nprint('ready', flush=True)\ntime.sleep(120)\n")
    assert stop_process(polite, grace_s=10) == -signal.SIGTERM

    stubborn = _sleeper(IGNORES_SIGTERM)
    started = time.monotonic()
    assert stop_process(stubborn, grace_s=0.5) == -signal.SIGKILL
    assert time.monotonic() - started < 10

    assert stop_process(stubborn) == -signal.SIGKILL  # already gone: its code again


def test_stop_processes_share_one_deadline() -> None:
    stubborn = [_sleeper(IGNORES_SIGTERM) for _ in range(3)]
    started = time.monotonic()
    codes = stop_processes(stubborn, grace_s=1.0)
    assert codes == [-signal.SIGKILL] * 3
    assert time.monotonic() - started < 1.0 + 3 * 0.1 + 10  # not 3 x the grace
