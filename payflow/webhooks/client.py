"""The webhook HTTP client: it connects only to addresses the SSRF guard approved.

`resolve_webhook_url` resolves a merchant's host once and checks every answer. A plain
HTTP client would then resolve the name AGAIN when it connects, and a name that answered
a public address to the check can answer 127.0.0.1 to the connect (DNS rebinding). Here
each POST carries its approved addresses (`WebhookClient.post(..., pinned=...)`) and the
connector's resolver answers the connection's lookup with exactly those addresses, for
that host and port only; it never asks DNS (the DNS cache is off, so every new connection
asks the resolver again). A URL whose host is an IP literal is connected to as written,
and is posted only when that literal is one of the pinned addresses.

Everything else stays as for the original URL: the pool is keyed on the original
`(scheme, host, port)`, the `Host` header comes from the URL, TLS runs with SNI and the
certificate check against the original host name. So a kept-alive connection is reused
only for the same host, and it was opened to an address approved when it was opened.
Redirects are never followed, no proxy is taken from the environment, and at most
`MAX_ANSWER_BYTES` of an answer's body are read (a larger body closes the connection).

The client is aiohttp's, not httpx's (the project's HTTP client elsewhere): one POST costs
it a fifth to a seventh of httpx's CPU here (`payflow bench webhooks`), and the webhook POST
was the payment worker's largest single cost (docs/pipeline.md, "Webhook HTTP client").

Invariant: no TCP connection is ever opened to an address that was not pinned for that
POST's host and port; a POST without a pin is refused (`WebhookTransportError`), it never
falls back to DNS.
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import socket
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

import aiohttp
import certifi
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from payflow.config import WebhookSettings
from payflow.errors import WebhookTransportError

# What is read of an answer's body (the status is all a delivery needs; reading a small
# body to its end lets the connection be reused), and the longest header line accepted
# (aiohttp's default, 8190 bytes, would turn a 200 with one long header into a failure).
MAX_ANSWER_BYTES = 64 * 1024
MAX_HEADER_LINE_BYTES = 64 * 1024
# Idle kept-alive connections are closed before the 5 s idle timeout common on servers
# (Node's default), so a POST rarely races a server's close of an idle connection.
KEEPALIVE_S = 4.0
# How long the body of an answered POST may take to arrive before its connection is
# dropped (the status counts either way).
DRAIN_S = 1.0
USER_AGENT = "payflow-webhooks/1"


@dataclass(frozen=True, slots=True)
class _Pin:
    host: str  # as the connector passes it: the ASCII (IDNA) host, IPv6 without brackets
    port: int
    addresses: tuple[str, ...]


_PIN: contextvars.ContextVar[_Pin | None] = contextvars.ContextVar("payflow_pin", default=None)


class _PinnedResolver(AbstractResolver):
    """Answers the connector's lookup with the current POST's pinned addresses, in order
    of preference; raises `OSError` (the connect fails) when nothing is pinned for
    `host:port`."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        pin = _PIN.get()
        if pin is None or pin.host != host.lower() or pin.port != port or not pin.addresses:
            raise OSError(f"refused: no approved address is pinned for {host}:{port}")
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                "proto": socket.IPPROTO_TCP,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in pin.addresses
        ]

    async def close(self) -> None:
        """Nothing to release."""


def _ssl_context(settings: WebhookSettings) -> ssl.SSLContext:
    """Verifies against `WEBHOOK_CA_BUNDLE` when set (a PEM file), else certifi's roots."""
    return ssl.create_default_context(cafile=settings.webhook_ca_bundle or certifi.where())


def _looks_like_ip(host: str) -> bool:
    """aiohttp's own test of a host it connects to without asking the resolver (a colon,
    or nothing but digits and dots); such a host must be a canonical, pinned literal."""
    return ":" in host or host.replace(".", "").isdigit()


class WebhookClient:
    """The one webhook HTTP client of a process: one bounded pool of max(
    `WEBHOOK_MAX_CONNECTIONS`, `WEBHOOK_MAX_IN_FLIGHT`) connections (never fewer than
    sends in flight, so a send never spends its timeout waiting for a connection), each
    POST bounded by `WEBHOOK_TIMEOUT_S`, pinned to its approved addresses.

    The aiohttp session is opened on the first POST (it belongs to the running loop).
    """

    def __init__(self, settings: WebhookSettings) -> None:
        self._ssl = _ssl_context(settings)
        self._limit = max(settings.webhook_max_connections, settings.webhook_max_in_flight)
        self._timeout = aiohttp.ClientTimeout(total=settings.webhook_timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._limit,
                limit_per_host=0,
                resolver=_PinnedResolver(),
                use_dns_cache=False,
                ssl=self._ssl,
                keepalive_timeout=KEEPALIVE_S,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                trust_env=False,
                auto_decompress=False,
                # No cookies: a Set-Cookie of one merchant must never reach another.
                cookie_jar=aiohttp.DummyCookieJar(),
                headers={"User-Agent": USER_AGENT},
                max_line_size=MAX_HEADER_LINE_BYTES,
                max_field_size=MAX_HEADER_LINE_BYTES,
            )
        return self._session

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], *, pinned: Sequence[str]
    ) -> int:
        """POST `body` with `headers` to `url`, connecting only to `pinned` (IP literals in
        order of preference, as the SSRF guard approved them); returns the HTTP status
        of the answer, whatever it is.

        Raises `WebhookTransportError` when no answer came (nothing pinned for the URL's
        host, every pinned address refused, reset, timeout, TLS or protocol failure);
        never another library's exception. A cancellation propagates as such.
        """
        target = URL(url)
        host = (target.raw_host or "").lower()
        port = target.port
        if not pinned or port is None:
            raise WebhookTransportError("refused: the request pins no approved address")
        if _looks_like_ip(host):
            try:
                literal = ipaddress.ip_address(host)
            except ValueError:
                raise WebhookTransportError(
                    f"refused: {host} is not a canonical IP address"
                ) from None
            if literal not in {ipaddress.ip_address(a.split("%")[0]) for a in pinned}:
                raise WebhookTransportError(f"refused: {host} is not a pinned address")
        token = _PIN.set(_Pin(host, port, tuple(pinned)))
        try:
            async with self._open().post(
                target, data=body, headers=dict(headers), allow_redirects=False
            ) as response:
                status = response.status
                await _drain(response)
                return status
        except aiohttp.ClientError as error:
            raise WebhookTransportError(_describe(error)) from error
        except (OSError, TimeoutError) as error:
            raise WebhookTransportError(f"{type(error).__name__}: {error}") from error
        finally:
            _PIN.reset(token)

    async def aclose(self) -> None:
        """Close every pooled connection."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> WebhookClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


async def _drain(response: aiohttp.ClientResponse) -> None:
    """Read the answer's body to its end when it is small, so the connection is reused;
    a body above `MAX_ANSWER_BYTES` is not read further and its connection is closed.
    The status has been answered already: a body that breaks off or stalls only costs
    the connection, never the answer (a 2xx stays a delivery)."""
    read = 0
    try:
        async with asyncio.timeout(DRAIN_S):
            while chunk := await response.content.readany():
                read += len(chunk)
                if read > MAX_ANSWER_BYTES:
                    response.close()
                    return
    except (aiohttp.ClientError, OSError, TimeoutError):
        response.close()


def _describe(error: aiohttp.ClientError) -> str:
    """The failure's kind and cause, e.g. `ClientConnectorCertificateError: …
    CERTIFICATE_VERIFY_FAILED …`, without the URL (a merchant may put a token in its
    query): an answer-level error names only its status and message."""
    if isinstance(error, aiohttp.ClientResponseError):
        return f"{type(error).__name__}: {error.status}, {error.message}"
    if isinstance(error, aiohttp.InvalidURL):
        return f"{type(error).__name__}: the URL was refused by the HTTP client"
    return f"{type(error).__name__}: {error}"


def build_http_client(settings: WebhookSettings) -> WebhookClient:
    """The webhook client of a process (`WebhookClient`)."""
    return WebhookClient(settings)
