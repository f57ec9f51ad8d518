"""One pure-ASGI middleware for what every request shares: the trace id, the body
size cap, the metrics, and the last-resort conversion of an unexpected exception
into a problem document (so no client ever sees a bare 500 page).

Tracing: the trace id is the W3C `traceparent`'s trace id when the request carries
exactly one valid header (`observability.parse_traceparent`), otherwise a fresh one;
an invalid header is ignored, never an error. `X-Request-ID` is a separate, client
chosen id (1-128 visible ASCII characters), bound as `request_id` in the request's
log lines and echoed; when absent or invalid the trace id stands in for it. Every
response carries `traceparent: 00-<trace id>-<this request's span id>-<flags>` and
`X-Request-ID`. Both ids are bound to every log line the request emits, and the
request ends with one `payflow.api.request` line (method, route, status, duration).
"""

from __future__ import annotations

import re
import time
from typing import Any

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from payflow.observability import SAMPLED, format_traceparent, new_trace_id, parse_traceparent

from .errors import ApiProblem, BodyTooLarge, problem_for
from .metrics import Metrics

REQUEST_ID = re.compile(rb"[\x21-\x7e]{1,128}")
REQUEST_ID_HEADER = b"x-request-id"
TRACEPARENT_HEADER = b"traceparent"

log = structlog.get_logger("payflow.api")


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


def _headers(scope: Scope, name: bytes) -> list[bytes]:
    return [bytes(value) for key, value in scope.get("headers", ()) if key == name]


def trace_of(scope: Scope) -> tuple[str, str, str]:
    """`(trace_id, request_id, response traceparent)` for one HTTP request.

    trace_id: the single valid incoming `traceparent`'s trace id, else a fresh one
    (several `traceparent` headers are invalid per W3C and ignored). request_id: a valid
    `X-Request-ID` (1-128 visible ASCII, sent once), else the trace id. The response traceparent
    names a new span of this request and keeps the caller's flags (sampled otherwise).
    """
    parents = _headers(scope, TRACEPARENT_HEADER)
    parent = parse_traceparent(parents[0]) if len(parents) == 1 else None
    trace_id = parent.trace_id if parent is not None else new_trace_id()
    # Like traceparent, several X-Request-ID headers name no one request: all are ignored.
    request_ids = _headers(scope, REQUEST_ID_HEADER)
    raw_request_id = request_ids[0] if len(request_ids) == 1 else None
    request_id = (
        raw_request_id.decode("ascii")
        if raw_request_id is not None and REQUEST_ID.fullmatch(raw_request_id)
        else trace_id
    )
    flags = parent.flags if parent is not None else SAMPLED
    return trace_id, request_id, format_traceparent(trace_id, flags=flags)


class RequestMiddleware:
    """Trace id in and out, size-capped bodies, per-route metrics, problem on failure."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        metrics: Metrics,
        path_limits: dict[str, int] | None = None,
    ) -> None:
        """`max_body_bytes` caps every body; `path_limits` maps an exact path to its own
        cap (the provider webhook: a signed delivery is never refused for its size below
        `PROVIDER_MAX_BODY_BYTES`, because a refused delivery is retried the same way
        until the provider gives up, losing every deposit in it)."""
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.path_limits = dict(path_limits or {})
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        trace_id, request_id, traceparent = trace_of(scope)
        state = scope.setdefault("state", {})
        state["trace_id"] = trace_id
        state["request_id"] = request_id
        trace_headers = [
            (TRACEPARENT_HEADER, traceparent.encode("ascii")),
            (REQUEST_ID_HEADER, request_id.encode("ascii")),
        ]
        status_holder = [500]
        response_started = [False]

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_started[0] = True
                status_holder[0] = message["status"]
                message["headers"] = [*message.get("headers", ()), *trace_headers]
            await send(message)

        with structlog.contextvars.bound_contextvars(trace_id=trace_id, request_id=request_id):
            try:
                await self._handle(scope, receive, send_wrapper, status_holder, response_started)
            finally:
                log.info(
                    "payflow.api.request",
                    method=scope.get("method", ""),
                    route=self._template(scope),
                    status=status_holder[0],
                    duration_ms=round((time.perf_counter() - started) * 1000, 1),
                )

    @staticmethod
    def _template(scope: Scope) -> str:
        return getattr(scope.get("route"), "path", None) or "unmatched"

    async def _handle(
        self,
        scope: Scope,
        receive: Receive,
        send_wrapper: Send,
        status_holder: list[int],
        response_started: list[bool],
    ) -> None:
        started = time.perf_counter()
        limit = self.path_limits.get(str(scope.get("path", "")), self.max_body_bytes)
        try:
            length = _header(scope, b"content-length")
            if length is not None and (not length.isdigit() or int(length) > limit):
                raise ApiProblem(
                    413,
                    "Payload too large",
                    f"request bodies are limited to {limit} bytes",
                    slug="too-large",
                )
            await self.app(scope, self._capped(receive, limit), send_wrapper)
        except Exception as exc:
            if response_started[0]:
                raise
            response = problem_for(exc, str(scope.get("path", "")))
            await response(scope, receive, send_wrapper)
        finally:
            self.metrics.observe(
                scope.get("method", ""),
                self._template(scope),
                status_holder[0],
                time.perf_counter() - started,
            )

    def _capped(self, receive: Receive, limit: int) -> Receive:
        received = 0

        async def capped() -> Message:
            nonlocal received
            message: dict[str, Any] = dict(await receive())
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        return capped
