"""Run the real API (`payflow api`, uvicorn workers) as a subprocess for tests."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from payflow.config import Settings
from payflow_lab.ports import free_port

SERVE = [sys.executable, "-c", "from payflow.cli import main; main()", "api"]


def server_env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "API_KEY": settings.api_key or "",
        "ADMIN_API_KEY": settings.admin_api_key or "",
        "PROVIDER_WEBHOOK_SECRET": settings.provider_webhook_secret or "",
        "WEBHOOK_ALLOW_HOSTS": ",".join(settings.webhook_allow_hosts),
        "REDIS_KEY_PREFIX": settings.redis_key_prefix,
        "RATE_LIMIT_PER_MINUTE": str(settings.rate_limit_per_minute),
        "DB_POOL_MIN": "2",
        "DB_POOL_MAX": "10",
        "LOG_LEVEL": "WARNING",
    }


# Generous: the suite runs several test files at once on two cores, and each uvicorn
# worker imports payflow (eth-account and all) before it answers. Never a timing
# assertion: only how long to wait before calling the start failed.
START_LIMIT_S = 120.0


@contextmanager
def running_api(settings: Settings, workers: int = 2) -> Iterator[str]:
    """Start `payflow api` on a free port; yield its base URL; stop it afterwards.

    Its stderr goes to a temporary file (a pipe nobody reads could fill and stall it)
    and is shown when the server exits early or does not start."""
    port = free_port()
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            [*SERVE, "--port", str(port), "--workers", str(workers)],
            env=server_env(settings),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )

        def output() -> str:
            stderr.seek(0)
            return stderr.read().decode(errors="replace")[-4000:]

        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + START_LIMIT_S
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"API exited: {output()}")
                try:
                    response = httpx.get(
                        f"{base}/health", headers={"X-API-Key": settings.api_key or ""}
                    )
                    if response.status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"API did not start within {START_LIMIT_S:g} s: {output()}")
                time.sleep(0.1)
            yield base
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
