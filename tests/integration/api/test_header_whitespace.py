"""Whitespace around a header value is not part of it (RFC 9110 §5.5): an
`Idempotency-Key` sent as `   padded-key \t` is the key `padded-key`, through the real
HTTP server (a raw request: HTTP client libraries refuse to send such a value)."""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

import orjson

from .conftest import API_KEY

BODY = orjson.dumps({"amount": "3.00", "currency": "USD"})


def _post_raw(base: str, key_line: bytes) -> tuple[int, Any]:
    """POST /api/v1/payments with `key_line` as the Idempotency-Key header line."""
    parts = urlsplit(base)
    assert parts.hostname is not None and parts.port is not None
    request = (
        b"POST /api/v1/payments HTTP/1.1\r\nHost: " + parts.netloc.encode() + b"\r\n"
        b"X-API-Key: " + API_KEY.encode() + b"\r\n" + key_line + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(BODY)).encode()
        + b"\r\nConnection: close\r\n\r\n"
        + BODY
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        size, _, rest = body.partition(b"\r\n")
        body = rest[: int(size, 16)]
    return status, orjson.loads(body)


def test_whitespace_around_the_idempotency_key_is_not_part_of_it(live_api: str) -> None:
    status, padded = _post_raw(live_api, b"Idempotency-Key:   padded-key \t")
    assert status == 202, padded
    status, plain = _post_raw(live_api, b"Idempotency-Key: padded-key")
    assert status == 202, plain
    assert plain == padded  # the same key: a replay of the same payment
    status, inner = _post_raw(live_api, b"Idempotency-Key: padded key")
    assert status == 422  # whitespace inside the value is still refused
    assert [error["field"] for error in inner["errors"]] == ["header.Idempotency-Key"]
