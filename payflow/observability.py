"""Structured logging (JSON, trace id from contextvars) and Prometheus metrics."""

from __future__ import annotations

import logging
import sys
import uuid

import structlog

from payflow.config import Settings

SECRET_FIELDS = frozenset({"api_key", "secret", "password", "signature", "authorization"})


def _redact_secrets(
    _logger: object, _method: str, event_dict: structlog.types.EventDict
) -> structlog.types.EventDict:
    for key in list(event_dict):
        if any(marker in key.lower() for marker in SECRET_FIELDS):
            event_dict[key] = "[redacted]"
    return event_dict


def configure_logging(settings: Settings) -> None:
    """Configure structlog once per process; secrets are redacted by field name."""
    level = logging.getLevelNamesMapping().get(settings.log_level.upper(), logging.INFO)
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if settings.log_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact_secrets,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def new_trace_id() -> str:
    """A fresh trace id for work that did not arrive with one."""
    return uuid.uuid4().hex


def bind_trace_id(trace_id: str) -> None:
    """Bind `trace_id` to every log line of the current task."""
    structlog.contextvars.bind_contextvars(trace_id=trace_id)


log = structlog.get_logger("payflow")
