"""One pure-ASGI middleware for what every request shares: the trace id, the body
size cap, the metrics, and the last-resort conversion of an unexpected exception
into a problem document (so no client ever sees a bare 500 page).
"""

from __future__ import annotations

import re
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from payflow.observability import new_trace_id

from .errors import ApiProblem, problem_for
from .metrics import Metrics

TRACE_ID = re.compile(rb"[A-Za-z0-9._:\-]{1,128}")
REQUEST_ID_HEADER = b"x-request-id"


class BodyTooLarge(Exception):
    """The streamed body went past the configured cap."""


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


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
        raw_trace = _header(scope, REQUEST_ID_HEADER)
        trace_id = (
            raw_trace.decode("ascii")
            if raw_trace is not None and TRACE_ID.fullmatch(raw_trace)
            else new_trace_id()
        )
        scope.setdefault("state", {})["trace_id"] = trace_id
        trace_header = (b"x-request-id", trace_id.encode("ascii"))
        status_holder = [500]
        response_started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
                status_holder[0] = message["status"]
                message["headers"] = [*message.get("headers", ()), trace_header]
            await send(message)

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
            if response_started:
                raise
            if isinstance(exc, BodyTooLarge):
                exc = ApiProblem(
                    413,
                    "Payload too large",
                    f"request bodies are limited to {limit} bytes",
                    slug="too-large",
                )
            response = problem_for(exc, str(scope.get("path", "")))
            await response(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.observe(
                scope.get("method", ""), template, status_holder[0], time.perf_counter() - started
            )

    def _capped(self, receive: Receive, limit: int) -> Receive:
        received = 0

        async def capped() -> Message:
            nonlocal received
            message: dict[str, Any] = dict(await receive())
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge
            return message

        return capped
