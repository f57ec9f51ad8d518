"""The tests' one way to run payflow as an OS process, on payflow_lab.supervisor.

`spawn_role` starts a long-running role (`python -m payflow relay`, `worker`, ...) on a
test's settings through `payflow_lab.supervisor.spawn_payflow`, its output in a log file;
the caller stops it (`payflow_lab.supervisor.stop_process`). `run_payflow` runs a one-shot
command (`payflow migrate`, `payflow alerts list`, ...) to its end and returns what it
printed and its exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from payflow.config import Settings
from payflow_lab.supervisor import spawn_payflow

ROOT = Path(__file__).resolve().parents[1]

# `python -m payflow`, and the CLI's entry point called directly (what the console script
# runs): the command lines the tests start payflow with.
PAYFLOW = (sys.executable, "-m", "payflow")
PAYFLOW_MAIN = (sys.executable, "-c", "from payflow.cli import main; main()")


def spawn_role(
    settings: Settings, log_path: Path, *args: str, **env: str
) -> subprocess.Popen[bytes]:
    """`python -m payflow *args` as its own process, on `settings`' database, broker
    vhost, Redis prefix and retry tiers (a small pool, plain-text logs), with `env` on
    top (e.g. `DATABASE_URL` through a proxy, `GATEWAY_DELAY_MIN_S`). Output goes to
    `log_path`; the caller stops the process."""
    base = {
        "DATABASE_URL": settings.database_url,
        "RABBITMQ_URL": settings.rabbitmq_url,
        "REDIS_KEY_PREFIX": settings.redis_key_prefix,
        "RETRY_TIERS_MS": ",".join(str(t) for t in settings.retry_tiers_ms),
        "WEBHOOK_ALLOW_HOSTS": "127.0.0.1",
        "LOG_JSON": "false",
        "DB_POOL_MIN": "1",
        "DB_POOL_MAX": "4",
    }
    return spawn_payflow(args, {**os.environ, **base, **env}, log_path, cwd=ROOT)


def run_payflow(
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    timeout: float = 60,
    cwd: Path | None = None,
    command: Sequence[str] = PAYFLOW,
) -> subprocess.CompletedProcess[str]:
    """Run `payflow ARGS` (`command`: `python -m payflow` unless told) with `env` as its
    whole environment (None: this process's) to its end; stdout and stderr captured as
    text, a non-zero exit status returned, not raised."""
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
