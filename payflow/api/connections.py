"""What an incomplete request may hold: the API's HTTP protocol with read deadlines and a
connection cap below the open-file limit (slowloris).

uvicorn's httptools protocol has no deadline on a request's head: a connection that
trickles its headers a byte at a time (or sends nothing) holds a file descriptor for as
long as it likes, and its keep-alive timer is disarmed by every byte. About a thousand
such connections exhaust the usual 1,024 open files, and from then on `accept` fails:
`/health` and every payment time out, with nothing logged.

`GuardedHttpToolsProtocol` (uvicorn's `http=` protocol for `payflow api` and `up`) adds:

* a head deadline, `API_HEADER_TIMEOUT_S`, counted from the connection's start (from the
  first byte of a later request on a keep-alive connection), however the bytes trickle;
  on expiry the client gets `408` and the connection is closed;
* a body deadline, `API_BODY_TIMEOUT_S`, from the end of the head to the end of the body;
  on expiry the connection is closed (the route sees a disconnect);
* a send deadline, `API_BODY_TIMEOUT_S` too: a client that stops reading its answers
  (a slow reader, or one that pipelines requests and never reads) fills the socket's
  buffers, and uvicorn then waits for it with no limit, even after the response, as a
  close waits for buffered bytes to drain; when the buffer stays above its high-water
  mark that long, the connection is aborted (a reset) and counted as `send_timeouts`;
* a cap on open connections per process (`API_MAX_CONNECTIONS`, by default the open-file
  limit less `FD_HEADROOM` for the pools, logs and the listener; `connection_cap`): a new
  connection at the cap evicts the connection that has waited longest for its request
  head, so a flood of slow connections cannot lock out a client that sends its request
  at once; with no such connection to evict (every one is running a request) the new one
  gets `503` and is closed;
* one warning line per kind at most every `LOG_EVERY_S` seconds, with counts
  (`payflow.api.slow_connections`): what was closed, evicted or refused since the last.

`raise_open_file_limit` lifts the soft RLIMIT_NOFILE to the hard limit at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import structlog
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from payflow.config import ApiSettings, load_settings

log = structlog.get_logger("payflow.api")

FD_HEADROOM = 128  # descriptors kept for pools (PostgreSQL, Redis, RabbitMQ), logs, epoll
MIN_CAP = 16
LOG_EVERY_S = 10.0
PROTOCOL = "payflow.api.connections:GuardedHttpToolsProtocol"  # uvicorn's `http=`

REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 34\r\nconnection: close\r\n\r\nrequest head not received in time\n"
)
SERVICE_UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 29\r\nconnection: close\r\n\r\ntoo many open connections\n\r\n"
)


def raise_open_file_limit() -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (inherited by uvicorn's
    worker processes); returns (soft, hard) as they are afterwards. Never raises: a
    limit that cannot be raised stays as it was."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def connection_cap(configured: int, soft_limit: int) -> int:
    """The open connections one API process accepts: `configured` (API_MAX_CONNECTIONS;
    0: automatic), never above `soft_limit` - FD_HEADROOM, never below MIN_CAP."""
    ceiling = max(MIN_CAP, soft_limit - FD_HEADROOM)
    return ceiling if configured <= 0 else max(MIN_CAP, min(configured, ceiling))


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """`header_timeout_s`: a request head's deadline; `body_timeout_s`: its body's;
    `max_connections`: open connections per process."""

    header_timeout_s: float
    body_timeout_s: float
    max_connections: int

    @classmethod
    def of(cls, settings: ApiSettings) -> ConnectionLimits:
        """The limits `settings` give under this process's current open-file limit."""
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return cls(
            settings.api_header_timeout_s,
            settings.api_body_timeout_s,
            connection_cap(settings.api_max_connections, soft),
        )


class _RateLimitedLog:
    """Counts what was done to slow connections; logs one warning with the counts at
    most every LOG_EVERY_S seconds (a flood writes a line, not a line per connection);
    counts held back are written when that time is up, so the end of a burst is logged
    too."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.last = 0.0
        self.pending: asyncio.TimerHandle | None = None
        self.state = (0, 0)  # open connections, cap: as of the last note

    def note(self, what: str, open_connections: int, cap: int) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1
        self.state = (open_connections, cap)
        wait = self.last + LOG_EVERY_S - time.monotonic()
        if wait <= 0:
            self.flush()
        elif self.pending is None:
            self.pending = asyncio.get_running_loop().call_later(wait, self.flush)

    def flush(self) -> None:
        self.pending = None
        if self.counts:
            open_connections, cap = self.state
            log.warning(
                "payflow.api.slow_connections",
                open_connections=open_connections,
                max_connections=cap,
                **self.counts,
            )
            self.counts = {}
            self.last = time.monotonic()


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the head and body deadlines and the connection
    cap described in the module docstring. `limits` is set by `configure` (or read once
    from the environment's settings in a worker process uvicorn started)."""

    limits: ClassVar[ConnectionLimits | None] = None
    _waiting: ClassVar[dict[GuardedHttpToolsProtocol, None]] = {}  # oldest first
    _log: ClassVar[_RateLimitedLog] = _RateLimitedLog()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._send_deadline: asyncio.TimerHandle | None = None

    @classmethod
    def configure(cls, limits: ConnectionLimits) -> None:
        """Use `limits` for every connection this process accepts from now on."""
        cls.limits = limits

    @classmethod
    def _limits(cls) -> ConnectionLimits:
        if cls.limits is None:
            cls.limits = ConnectionLimits.of(load_settings())
        return cls.limits

    # --- connection start: the cap, then the head deadline
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        limits = self._limits()
        if len(self.connections) >= limits.max_connections and not self._evict_oldest_waiting():
            self._log.note("refused", len(self.connections), limits.max_connections)
            transport.write(SERVICE_UNAVAILABLE)
            transport.close()
            self.transport = transport  # connection_lost is not called for it: nothing to do
            self.parser = None  # type: ignore[assignment]
            return
        super().connection_made(transport)
        self._await_head()

    def _evict_oldest_waiting(self) -> bool:
        for victim in self._waiting:
            if victim.transport is not None and not victim.transport.is_closing():
                victim._close("evicted", REQUEST_TIMEOUT)
                return True
        return False

    def _await_head(self) -> None:
        if self._deadline is None:
            limits = self._limits()
            self._waiting[self] = None
            self._deadline = self.loop.call_later(
                limits.header_timeout_s, self._close, "header_timeouts", REQUEST_TIMEOUT
            )

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._waiting.pop(self, None)

    def _close(self, what: str, answer: bytes | None) -> None:
        """A deadline passed (or the cap evicts this connection): answer if nothing was
        answered yet, close, and count it."""
        self._deadline = None
        self._waiting.pop(self, None)
        if self.transport.is_closing():
            return
        if answer is not None and (self.cycle is None or self.cycle.response_complete):
            self.transport.write(answer)
        self.transport.close()
        self._log.note(what, len(self.connections), self._limits().max_connections)

    # --- parser callbacks: the head's deadline, then the body's
    def data_received(self, data: bytes) -> None:
        if self.parser is None:  # a refused connection still delivering bytes
            return
        if self._deadline is None and (self.cycle is None or self.cycle.response_complete):
            self._await_head()  # a keep-alive connection's next request began
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()
        if self.transport.is_closing() or self.cycle is None or self.cycle.response_complete:
            return
        if self.parser is not None and not self._message_complete:
            self._deadline = self.loop.call_later(
                self._limits().body_timeout_s, self._close, "body_timeouts", None
            )

    @property
    def _message_complete(self) -> bool:
        return self.cycle is not None and not self.cycle.more_body

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    # --- flow control: a client that takes no byte of its answers meets a deadline
    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_deadline is None:
            self._send_deadline = self.loop.call_later(
                self._limits().body_timeout_s, self._abort_stalled
            )

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stop_send_deadline()

    def _stop_send_deadline(self) -> None:
        if self._send_deadline is not None:
            self._send_deadline.cancel()
            self._send_deadline = None

    def _abort_stalled(self) -> None:
        """The client left the send buffer full for the whole deadline: `close` would
        wait for those bytes forever, so the connection is aborted."""
        self._send_deadline = None
        self._disarm()
        if self.transport.is_closing() and self.transport.get_write_buffer_size() == 0:
            return
        self.transport.abort()
        self._log.note("send_timeouts", len(self.connections), self._limits().max_connections)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._stop_send_deadline()
        if self.flow is None:  # refused in connection_made: uvicorn never saw it
            return
        super().connection_lost(exc)
