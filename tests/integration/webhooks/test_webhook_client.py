"""The webhook HTTP client (`payflow.webhooks.client`) against a real local server that
answers what each test scripts: what it sends, what it accepts back, what it refuses.
Real sockets; no DNS is involved (every POST is pinned)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from payflow.config import Settings
from payflow.errors import WebhookTransportError
from payflow.webhooks.client import MAX_ANSWER_BYTES, USER_AGENT, build_http_client
from payflow.webhooks.ssrf import UnsafeWebhookUrl, check_webhook_url
from tests.integration.webhooks.http_requests import read_request

NAME = "hooks.client.test"
SETTINGS = Settings()  # the webhook client reads only its WEBHOOK_* settings
Answer = Callable[[int], bytes]  # request number (0-based) -> raw HTTP answer


@dataclass
class Scripted:
    """An HTTP/1.1 server on 127.0.0.1 answering each request with `answer(n)`; records
    every request head (lower-cased header names)."""

    answer: Answer
    heads: list[dict[str, str]] = field(default_factory=list)
    port: int = 0
    _server: asyncio.AbstractServer | None = None

    async def start(self) -> Scripted:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                headers = await read_request(reader)
                self.heads.append(headers)
                raw = self.answer(len(self.heads) - 1)
                if not raw:  # reset the connection without answering
                    writer.transport.abort()
                    return
                writer.write(raw)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def servers() -> AsyncIterator[list[Scripted]]:
    started: list[Scripted] = []
    yield started
    for server in started:
        await server.stop()


async def _server(servers: list[Scripted], answer: Answer) -> Scripted:
    server = await Scripted(answer).start()
    servers.append(server)
    return server


def _ok(extra: bytes = b"", body: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\n" + extra + b"content-length: %d\r\n\r\n" % len(body) + body


async def test_a_long_header_line_in_a_2xx_is_still_a_delivery(servers: list[Scripted]) -> None:
    policy = b"content-security-policy: " + b"a" * 9000 + b"\r\n"
    server = await _server(servers, lambda _: _ok(policy))
    async with build_http_client(SETTINGS) as client:
        status = await client.post(
            f"http://{NAME}:{server.port}/h", b"{}", {}, pinned=["127.0.0.1"]
        )
    assert status == 200


async def test_a_2xx_whose_body_breaks_off_is_still_a_delivery(servers: list[Scripted]) -> None:
    # Announces 1,000 bytes, sends 10, then the connection is closed.
    broken = b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n0123456789"

    def answer(n: int) -> bytes:
        return broken if n == 0 else _ok()

    server = await _server(servers, answer)
    url = f"http://{NAME}:{server.port}/h"
    async with build_http_client(SETTINGS) as client:
        assert await client.post(url, b"{}", {}, pinned=["127.0.0.1"]) == 200
        assert await client.post(url, b"{}", {}, pinned=["127.0.0.1"]) == 200
    assert len(server.heads) == 2


async def test_a_large_answer_is_not_read_to_its_end(servers: list[Scripted]) -> None:
    big = _ok(body=b"x" * (8 * MAX_ANSWER_BYTES))
    server = await _server(servers, lambda _: big)
    url = f"http://{NAME}:{server.port}/h"
    async with build_http_client(SETTINGS) as client:
        assert await client.post(url, b"{}", {}, pinned=["127.0.0.1"]) == 200
        assert await client.post(url, b"{}", {}, pinned=["127.0.0.1"]) == 200


async def test_no_cookie_of_one_answer_is_sent_with_the_next_post(servers: list[Scripted]) -> None:
    cookie = b"set-cookie: session=merchant-a; Path=/\r\n"
    server = await _server(servers, lambda _: _ok(cookie))
    url = f"http://{NAME}:{server.port}/h"
    async with build_http_client(SETTINGS) as client:
        for _ in range(2):
            assert await client.post(url, b"{}", {"x-a": "1"}, pinned=["127.0.0.1"]) == 200
    assert [("cookie" in head) for head in server.heads] == [False, False]
    assert {head["user-agent"] for head in server.heads} == {USER_AGENT}
    assert {head["host"] for head in server.heads} == {f"{NAME}:{server.port}"}
    assert {head["content-length"] for head in server.heads} == {"2"}


async def test_a_failure_names_its_cause_and_never_the_url(servers: list[Scripted]) -> None:
    too_long = b"x-huge: " + b"a" * (2 * 64 * 1024) + b"\r\n"
    server = await _server(servers, lambda _: _ok(too_long))
    async with build_http_client(SETTINGS) as client:
        with pytest.raises(WebhookTransportError) as refused:
            await client.post(
                f"http://{NAME}:{server.port}/h?token=s3cret", b"{}", {}, pinned=["127.0.0.1"]
            )
        with pytest.raises(WebhookTransportError, match=r"ServerDisconnected|Connection"):
            reset = await _server(servers, lambda _: b"")
            await client.post(
                f"http://{NAME}:{reset.port}/h?token=s3cret", b"{}", {}, pinned=["127.0.0.1"]
            )
    assert "s3cret" not in str(refused.value) and "ClientResponseError" in str(refused.value)


@pytest.mark.parametrize(
    "host", ["134744072", "8.8.8.8.", "010.010.010.010", "8.8.2056", "0x8.8.8.8"]
)
async def test_a_non_canonical_ipv4_literal_is_refused_before_and_at_the_post(host: str) -> None:
    """Spellings of 8.8.8.8 that resolvers accept: refused when the URL is accepted (the
    client could never deliver them), and by the client itself if one is stored."""
    with pytest.raises(UnsafeWebhookUrl, match="canonical"):
        check_webhook_url(f"http://{host}/h", ())
    if "x" in host:  # a hex form is a name to aiohttp: it asks the pinned resolver
        return
    async with build_http_client(SETTINGS) as client:
        # aiohttp connects to what looks like a literal without asking the resolver, so
        # the client refuses any such host that is not a canonical, pinned literal.
        with pytest.raises(WebhookTransportError, match="refused"):
            await client.post(f"http://{host}:80/h", b"{}", {}, pinned=["8.8.8.8"])


async def test_the_canonical_literal_is_accepted() -> None:
    assert check_webhook_url("http://8.8.8.8/h", ()) == "8.8.8.8"
    assert check_webhook_url("http://[2001:4860:4860::8888]/h", ()) == "2001:4860:4860::8888"
