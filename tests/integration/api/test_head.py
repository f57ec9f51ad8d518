"""HEAD on the real `payflow api` process: every GET route answers HEAD with the GET's
status and headers and no body (it answered 405 before); a path without GET still 405."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx

from .conftest import ADMIN_KEY


def _raw_head(base: str, path: str, key: str) -> bytes:
    """The raw bytes the server sends for a HEAD (httpx would hide a stray body)."""
    parts = urlsplit(base)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(
            f"HEAD {path} HTTP/1.1\r\nHost: x\r\nX-API-Key: {key}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_every_get_route_answers_head_like_get_without_a_body(live_api: str) -> None:
    headers = {"X-API-Key": ADMIN_KEY}
    for path in ("/health", "/api/v1/payments", "/api/v1/admin/dlq", "/openapi.json"):
        got = httpx.get(f"{live_api}{path}", headers=headers, timeout=10)
        head = httpx.head(f"{live_api}{path}", headers=headers, timeout=10)
        assert (path, head.status_code) == (path, got.status_code)
        assert head.headers["content-type"] == got.headers["content-type"]
        assert head.content == b""
        raw = _raw_head(live_api, path, ADMIN_KEY)
        status_line, _, rest = raw.partition(b"\r\n")
        assert status_line.split()[1] == str(got.status_code).encode()
        assert rest.endswith(b"\r\n\r\n")  # the headers end the answer: no body follows


def test_head_needs_the_same_api_key_as_get(live_api: str) -> None:
    response = httpx.head(f"{live_api}/api/v1/payments", timeout=10)
    assert response.status_code == 401
    assert response.content == b""


def test_head_on_a_path_without_get_is_405(live_api: str) -> None:
    response = httpx.head(
        f"{live_api}/api/v1/webhooks/provider", headers={"X-API-Key": ADMIN_KEY}, timeout=10
    )
    assert response.status_code == 405
    assert "POST" in response.headers["allow"]
