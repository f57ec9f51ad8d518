"""Slow clients cannot starve the API (slowloris): a real `payflow api` process with the
usual 1,024 open files (soft and hard, as `ulimit -n 1024` gives it) and 1,100 connections
from another process that trickle their request heads a byte at a time. `/health` and an
authenticated `POST /payments` still answer, every slow connection is closed by the head
deadline (`408`) or evicted by a newer connection at the cap, and the closing is logged
(one rate-limited line, not one per connection). Without the guard the process ran out of
descriptors and both requests timed out, with nothing logged."""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from payflow.api.connections import FD_HEADROOM, connection_cap
from payflow.config import Settings
from payflow_lab.ports import free_port
from tests.integration.api.server import SERVE, START_LIMIT_S, server_env

ROOT = Path(__file__).resolve().parents[3]
FILE_LIMIT = 1024
SLOW = 1100
HEADER_TIMEOUT_S = 4.0


def _file_limit() -> None:  # runs in the API process before exec
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


@contextmanager
def api_with_file_limit(settings: Settings, log: Path, **extra: str) -> Iterator[str]:
    """`payflow api` (one worker) on a free port, limited to FILE_LIMIT open files, with
    the environment `extra` on top."""
    port = free_port()
    env = {
        **server_env(settings),
        "API_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
        "LOG_LEVEL": "WARNING",
        "LOG_JSON": "true",
        **extra,
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*SERVE, "--port", str(port), "--workers", "1"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_file_limit,  # only setrlimit, before exec
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while True:
            assert process.poll() is None, log.read_text()[-4000:]
            try:
                if httpx.get(
                    f"{base}/health", headers={"X-API-Key": settings.api_key or ""}
                ).is_success:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-4000:]
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _slow_connection_lines(log: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == "payflow.api.slow_connections"]


def _closings_logged(log: Path) -> int:
    """Connections the log says were evicted or closed at the head deadline."""
    return sum(
        int(line.get("evicted", 0)) + int(line.get("header_timeouts", 0))
        for line in _slow_connection_lines(log)
    )


def test_the_cap_stays_below_the_file_limit() -> None:
    assert connection_cap(0, FILE_LIMIT) == FILE_LIMIT - FD_HEADROOM
    assert connection_cap(5000, FILE_LIMIT) == FILE_LIMIT - FD_HEADROOM
    assert connection_cap(100, FILE_LIMIT) == 100
    assert connection_cap(0, 100) == 16


def test_slow_connections_cannot_starve_health_and_payments(
    api_settings: Settings, tmp_path: Path
) -> None:
    log = tmp_path / "api.log"
    with api_with_file_limit(api_settings, log) as base:
        port = base.rsplit(":", 1)[1]
        with tempfile.TemporaryFile() as report:
            slow = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.api.slowloris", port, str(SLOW), "20"],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=report,
            )
            try:
                assert slow.stdout is not None
                assert slow.stdout.readline().strip() == b"opened"
                # Every slow connection is open (or was evicted for a newer one); new
                # clients still get in and are answered.
                key = {"X-API-Key": api_settings.api_key or ""}
                with httpx.Client(base_url=base, timeout=15) as client:
                    health = client.get("/health", headers=key)
                    created = client.post(
                        "/api/v1/payments",
                        json={"amount": "10.00", "currency": "USD"},
                        headers={**key, "Idempotency-Key": uuid.uuid4().hex},
                    )
                assert health.status_code == 200, health.text
                assert created.status_code == 202, created.text
                assert created.json()["status"] == "pending"
                out, _ = slow.communicate(timeout=120)
            finally:
                if slow.poll() is None:
                    slow.kill()
                    slow.wait()
            report.seek(0)
            assert slow.returncode == 0, report.read().decode(errors="replace")[-3000:]
        # Every slow connection is counted in the log: the counts held back after a line
        # are written when its 10 s are up.
        deadline = time.monotonic() + 30
        while _closings_logged(log) < SLOW and time.monotonic() < deadline:
            time.sleep(0.5)
    results = json.loads(out.decode().strip().splitlines()[-1])
    assert len(results) == SLOW
    # Each was closed by the server: evicted at the cap, or at the head deadline; none
    # held on for the whole run, and each was told why.
    still_open = [r for r in results if r["closed_after_s"] is None]
    assert still_open == []
    assert all(r["closed_after_s"] < HEADER_TIMEOUT_S + 8 for r in results), results
    answers = {r["answer"] for r in results}
    assert answers <= {"HTTP/1.1 408 Request Timeout"}, answers
    closing = _slow_connection_lines(log)
    assert closing, log.read_text()[-3000:]
    assert len(closing) <= 4  # rate-limited: a line per 10 s at most, not one per connection
    assert closing[0]["max_connections"] == FILE_LIMIT - FD_HEADROOM
    assert _closings_logged(log) >= SLOW


def _closed_after(sock: socket.socket, trickle: bytes, limit_s: float) -> tuple[float, bytes]:
    """Send `trickle` a byte every 0.25 s until the server closes the connection; returns
    (seconds until it did, what it answered)."""
    started = time.monotonic()
    sock.settimeout(0.25)
    answer = b""
    for index in range(len(trickle)):
        try:
            sock.sendall(trickle[index : index + 1])
        except OSError:
            break
        try:
            data = sock.recv(4096)
        except TimeoutError:
            continue
        except OSError:
            break
        if not data:
            break
        answer += data
        assert time.monotonic() - started < limit_s, answer
    return time.monotonic() - started, answer


def test_every_incomplete_request_meets_a_deadline(api_settings: Settings, tmp_path: Path) -> None:
    """The head from the connection's start (nothing sent, or a trickle), the next head on
    a keep-alive connection (its keep-alive timer not disarmed by each byte), and
    the body from the end of its head."""
    key = (api_settings.api_key or "").encode()
    slow_head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 400
    env = {"API_HEADER_TIMEOUT_S": "2", "API_BODY_TIMEOUT_S": "3"}
    with api_with_file_limit(api_settings, tmp_path / "api.log", **env) as base:
        address = ("127.0.0.1", int(base.rsplit(":", 1)[1]))
        with socket.create_connection(address) as silent:  # sends nothing at all
            silent.settimeout(10)
            started = time.monotonic()
            assert silent.recv(4096).startswith(b"HTTP/1.1 408 ")
            assert 1.5 < time.monotonic() - started < 8
        with socket.create_connection(address) as trickling:
            took, answer = _closed_after(trickling, slow_head, limit_s=8)
            assert answer.startswith(b"HTTP/1.1 408 ") and 1.5 < took < 8
        with socket.create_connection(address) as keep_alive:
            keep_alive.sendall(
                b"GET /health HTTP/1.1\r\nHost: x\r\nX-API-Key: " + key + b"\r\n\r\n"
            )
            keep_alive.settimeout(10)
            first = keep_alive.recv(65536)
            while not first.endswith(b'{"status":"ok"}'):
                first += keep_alive.recv(65536)
            assert first.startswith(b"HTTP/1.1 200 ")
            took, answer = _closed_after(keep_alive, slow_head, limit_s=8)
            assert answer.startswith(b"HTTP/1.1 408 ") and 1.5 < took < 8
        with socket.create_connection(address) as slow_body:
            slow_body.sendall(
                b"POST /api/v1/payments HTTP/1.1\r\nHost: x\r\nX-API-Key: "
                + key
                + b"\r\nIdempotency-Key: slow-body\r\nContent-Type: application/json"
                + b"\r\nContent-Length: 400\r\n\r\n"
            )
            took, answer = _closed_after(slow_body, b"{" + b" " * 398 + b"}", limit_s=10)
            assert 2.5 < took < 10 and b" 202 " not in answer
