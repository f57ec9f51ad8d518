"""A client that sends its requests at once but never reads the answers (a slow reader:
pipelined requests whose responses fill the socket's send buffer) holds no connection
past the body deadline: at the connection cap `/health` is still answered."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx

from payflow.config import Settings
from tests.integration.api.test_slow_clients import api_with_file_limit

CAP = 16  # MIN_CAP: API_MAX_CONNECTIONS below it is raised to it


def _never_reading(address: tuple[str, int]) -> socket.socket:
    """A connection with a small receive window that pipelines many requests for a large
    document and never reads a byte of the answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(address)
    sock.setblocking(False)
    request = b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"
    try:
        sock.send(request * 200)
    except BlockingIOError:
        pass
    return sock


def test_clients_that_never_read_their_answers_are_closed(
    api_settings: Settings, tmp_path: Path
) -> None:
    env = {"API_MAX_CONNECTIONS": str(CAP), "API_HEADER_TIMEOUT_S": "2", "API_BODY_TIMEOUT_S": "3"}
    with api_with_file_limit(api_settings, tmp_path / "api.log", **env) as base:
        address = ("127.0.0.1", int(base.rsplit(":", 1)[1]))
        readers = [_never_reading(address) for _ in range(CAP)]
        try:
            time.sleep(2)  # every reader's responses have filled its buffers by now
            statuses: list[int | str] = []
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    response = httpx.get(
                        f"{base}/health",
                        headers={"X-API-Key": api_settings.api_key or ""},
                        timeout=5,
                    )
                    statuses.append(response.status_code)
                    if response.status_code == 200:
                        break
                except httpx.TransportError as error:
                    statuses.append(type(error).__name__)
                time.sleep(0.5)
            assert statuses and statuses[-1] == 200, statuses
            # Each stalled reader was closed: its socket reports the end (or a reset).
            for reader in readers:
                reader.setblocking(True)
                reader.settimeout(10)
                try:
                    while reader.recv(1 << 20):
                        pass
                except ConnectionResetError:
                    pass
        finally:
            for reader in readers:
                reader.close()
