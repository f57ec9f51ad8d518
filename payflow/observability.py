"""Structured logging (JSON, trace id from contextvars) and W3C trace context.

One trace id (32 lowercase hex, W3C `trace-id`) follows a piece of work through every
process: it arrives on HTTP in `traceparent` (or is made fresh), is stored in the
`trace_id` column of every row the request writes (payments, payment events, outbox,
unmatched provider events), travels on every broker message (`traceparent` and
`trace-id` headers), is bound to every log line of the task handling it, and leaves
on the merchant webhook as `traceparent: 00-<trace id>-<new span id>-01`.
"""

from __future__ import annotations

import logging
import re
import secrets
import sys
import uuid
from dataclasses import dataclass

import structlog

from payflow.config import ObservabilitySettings

SECRET_FIELDS = frozenset({"api_key", "secret", "password", "signature", "authorization"})


def _redact_secrets(
    _logger: object, _method: str, event_dict: structlog.types.EventDict
) -> structlog.types.EventDict:
    for key in list(event_dict):
        if any(marker in key.lower() for marker in SECRET_FIELDS):
            event_dict[key] = "[redacted]"
    return event_dict


def configure_logging(settings: ObservabilitySettings) -> None:
    """Configure structlog; secrets are redacted by field name.

    Loggers are cached on first use, and a cached logger keeps the processor LIST it was
    built with; so a second call (several roles in one process, tests) updates that one
    list in place instead of installing a new one that cached loggers would never see.
    """
    level = logging.getLevelNamesMapping().get(settings.log_level.upper(), logging.INFO)
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if settings.log_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    processors: list[structlog.types.Processor] = structlog.get_config()["processors"]
    processors[:] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _redact_secrets,
        structlog.processors.format_exc_info,
        renderer,
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=settings.log_cache_loggers,
    )


TRACEPARENT_HEADER = "traceparent"
SAMPLED = "01"
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


@dataclass(frozen=True, slots=True)
class TraceParent:
    """A parsed W3C `traceparent`: trace id (32 hex), parent span id (16 hex), flags (2 hex)."""

    trace_id: str
    parent_id: str
    flags: str


def parse_traceparent(value: str | bytes | None) -> TraceParent | None:
    """Parse a W3C `traceparent` header value strictly; None when absent or invalid.

    Accepted: exactly `00-<32 lowercase hex>-<16 lowercase hex>-<2 lowercase hex>`, with
    neither the trace id nor the parent id all zeros. Anything else (another version,
    upper case, extra fields, whitespace inside, non-ASCII bytes) is ignored by the caller,
    never an error: a bad header from a client must not fail its request.
    """
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    trace_id, parent_id, flags = match.groups()
    if trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        return None
    return TraceParent(trace_id, parent_id, flags)


def is_trace_id(value: object) -> bool:
    """True for a valid W3C trace id: 32 lowercase hex, not all zeros."""
    return isinstance(value, str) and bool(_TRACE_ID.fullmatch(value)) and value != _ZERO_TRACE


def new_trace_id() -> str:
    """A fresh trace id for work that did not arrive with one (32 lowercase hex)."""
    return uuid.uuid4().hex


def new_span_id() -> str:
    """A fresh W3C span id: 16 lowercase hex, never all zeros."""
    while True:
        span = secrets.token_hex(8)
        if span != _ZERO_SPAN:
            return span


def format_traceparent(trace_id: str, span_id: str | None = None, flags: str = SAMPLED) -> str:
    """`00-<trace_id>-<span_id or a new one>-<flags>`; `trace_id` must be `is_trace_id`."""
    return f"00-{trace_id}-{span_id or new_span_id()}-{flags}"


def outbound_traceparent(trace_id: str | None) -> str | None:
    """The `traceparent` for a call payflow makes on behalf of `trace_id` (a new span,
    sampled); None when the stored trace id is missing or not a W3C trace id (rows
    written before traces were W3C ids), so no malformed header ever leaves."""
    if trace_id is None or not is_trace_id(trace_id):
        return None
    return format_traceparent(trace_id)


def bind_stored_trace(trace_id: str | None) -> None:
    """Log under a stored row's `trace_id` (also for a message that carried none); a row
    stored without one (None or empty) leaves the current binding as it is."""
    if trace_id:
        structlog.contextvars.bind_contextvars(trace_id=trace_id)


def bind_trace_id(trace_id: str) -> None:
    """Bind `trace_id` to every log line of the current task."""
    structlog.contextvars.bind_contextvars(trace_id=trace_id)


log = structlog.get_logger("payflow")
