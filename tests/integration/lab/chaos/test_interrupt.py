"""SIGTERM to `payflow chaos` in the middle of a run stops everything it started: its
private PostgreSQL, RabbitMQ, Redis and anvil, and every role process (a fault thread
restarting a service races the teardown; the cluster's guard settles it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from tests.integration.lab.chaos.test_chaos import pytestmark as chaos_marks

pytestmark = chaos_marks


def _roots() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("payflow-chaos-*"))


def _using(roots: set[Path]) -> list[str]:
    """Command lines of live processes that name one of `roots` (PostgreSQL, daemonised
    by pg_ctl, is no child of the run: it is found by its data directory)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(str(r) in cmdline for r in roots):
            found.append(cmdline[:120])
    return found


def _named_by(root: Path, pids: set[int]) -> bool:
    """Whether one of `pids` names `root` in its command line, working directory or
    environment (the private RabbitMQ has all three; redis-server rewrites its title)."""
    for pid in pids:
        try:
            process = psutil.Process(pid)
            seen = [*process.cmdline(), process.cwd(), *process.environ().values()]
        except psutil.Error:
            continue
        if any(str(root) in part for part in seen):
            return True
    return False


def test_sigterm_mid_run_leaves_nothing_running(tmp_path: Path) -> None:
    before = _roots()
    log_dir = tmp_path / "logs"
    out = tmp_path / "out.log"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "payflow",
                "chaos",
                "--events",
                "300",
                "--load-s",
                "60",
                "--log-dir",
                str(log_dir),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    deadline = time.monotonic() + 180
    while b"system up" not in out.read_bytes():
        assert proc.poll() is None, out.read_text()[-2000:]
        assert time.monotonic() < deadline, "the system did not come up"
        time.sleep(0.5)
    time.sleep(6)  # load and faults running
    children = {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
    # This run's root: another chaos run (the suite runs files in parallel) may have made
    # one meanwhile, so it is the new root that this run's own children name.
    roots = {root for root in _roots() - before if _named_by(root, children)}
    assert children, "the run has no child processes"
    assert len(roots) == 1 and _using(roots), "the run's private services were not found"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 130, out.read_text()[-2000:]
    assert "interrupted; every private service and process was stopped" in out.read_text()
    time.sleep(1)
    alive = [
        pid
        for pid in children
        if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]
    assert alive == []  # roles, RabbitMQ, Redis, anvil
    assert _using(roots) == []  # PostgreSQL included
    assert not any(root.exists() for root in roots)
