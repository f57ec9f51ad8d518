"""The webhook HTTP transport: it connects only to addresses the SSRF guard approved.

`resolve_webhook_url` resolves a merchant's host once and checks every answer. A plain
HTTP client would then resolve the name AGAIN when it connects, and a name that answered
a public address to the check can answer 127.0.0.1 to the connect (DNS rebinding).
Here the request carries the approved addresses (`pinned(addresses)` as the request
extensions) and the network backend connects to those addresses instead of resolving.

Everything else stays as for the original URL: httpcore keys its pool on the original
`(scheme, host, port)`, writes the `Host` header from the URL, and runs TLS with SNI
and the certificate check against the original host name. So a kept-alive connection is
reused only for the same host, and it was opened to an address approved when it was
opened. Redirects stay off (the client never follows them).

Invariant: the transport never opens a TCP connection to an address that was not
pinned for that request's host and port; a request without a pin is refused
(`httpx.ConnectError`), it never falls back to the resolver.
"""

from __future__ import annotations

import contextvars
import ssl
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

PIN_EXTENSION = "payflow.pinned_addresses"


@dataclass(frozen=True, slots=True)
class _Pin:
    host: str  # as httpcore passes it: the ASCII (IDNA) host, IPv6 without brackets
    port: int
    addresses: tuple[str, ...]


_PIN: contextvars.ContextVar[_Pin | None] = contextvars.ContextVar("payflow_pin", default=None)


def pinned(addresses: Sequence[str]) -> dict[str, Any]:
    """Request extensions that allow connecting to `addresses` (IP literals, in order of
    preference), e.g. `client.post(url, extensions=pinned(approved))`."""
    return {PIN_EXTENSION: tuple(addresses)}


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Opens TCP connections to the current request's pinned addresses only.

    Tries each address in order until one connects, all within the one connect timeout.
    Raises `httpcore.ConnectError` when nothing is pinned for `host:port`.
    """

    def __init__(self, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        pin = _PIN.get()
        if pin is None or pin.host != host.lower() or pin.port != port or not pin.addresses:
            raise httpcore.ConnectError(f"refused: no approved address is pinned for {host}:{port}")
        deadline = None if timeout is None else time.monotonic() + timeout
        failure: Exception | None = None
        for address in pin.addresses:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            try:
                return await self._inner.connect_tcp(
                    address, port, remaining, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
                if deadline is not None and time.monotonic() >= deadline:
                    break
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("refused: webhooks never connect to a unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _as_httpx_error(error: Exception, request: httpx.Request) -> httpx.TransportError:
    """The httpx exception of the same name (httpx mirrors httpcore's hierarchy)."""
    kind = getattr(httpx, type(error).__name__, None)
    if not (isinstance(kind, type) and issubclass(kind, httpx.TransportError)):
        kind = httpx.TransportError
    return kind(str(error), request=request)


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any, request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except httpcore.TimeoutException as error:
            raise _as_httpx_error(error, self._request) from error
        except (httpcore.NetworkError, httpcore.ProtocolError) as error:
            raise _as_httpx_error(error, self._request) from error

    async def aclose(self) -> None:
        if hasattr(self._stream, "aclose"):
            await self._stream.aclose()


class PinnedTransport(httpx.AsyncBaseTransport):
    """An httpx transport over one httpcore pool whose backend is a `PinnedBackend`.

    `ssl_context` verifies the server's certificate against the URL's host name.
    """

    def __init__(self, ssl_context: ssl.SSLContext, limits: httpx.Limits) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=PinnedBackend(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send `request` to one of its pinned addresses (see the module docstring)."""
        addresses = request.extensions.get(PIN_EXTENSION)
        if not addresses:
            raise httpx.ConnectError(
                "refused: the request pins no approved address", request=request
            )
        assert isinstance(request.stream, httpx.AsyncByteStream)
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        pin = _Pin(url.raw_host.decode("ascii").lower(), port, tuple(addresses))
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        token = _PIN.set(pin)
        try:
            response = await self._pool.handle_async_request(core_request)
        except httpcore.TimeoutException as error:
            raise _as_httpx_error(error, request) from error
        except (httpcore.NetworkError, httpcore.ProtocolError) as error:
            raise _as_httpx_error(error, request) from error
        except httpcore.UnsupportedProtocol as error:
            raise httpx.UnsupportedProtocol(str(error), request=request) from error
        finally:
            _PIN.reset(token)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream, request),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        """Close every pooled connection."""
        await self._pool.aclose()
