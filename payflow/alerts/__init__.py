"""Alerts: one sink interface every job and role raises alerts through.

The interface is fixed here so that jobs depend on it alone. The real sink (cooldown
per key, bounded memory, the `alerts` table, pluggable delivery) lives in
`payflow.alerts.sink` and is built by `payflow.alerts.build.build_alert_sink(settings, pool)`;
`store.py` is the `alerts` table, `cli.py` the `payflow alerts` commands. An alert sink
NEVER raises into the job that called it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Protocol

import structlog

__all__ = ["AlertSink", "LogAlertSink", "Severity"]

log = structlog.get_logger("payflow.alerts")


class Severity(StrEnum):
    """How urgent an alert is; mirrored by a CHECK in the `alerts` table."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class AlertSink(Protocol):
    """Where alerts go. Implementations swallow and log their own failures."""

    async def fire(
        self,
        key: str,
        severity: Severity,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Raise (or refresh) the alert `key`, e.g. ``recon.mismatch:hot``; never raises."""
        ...

    async def resolve(self, key: str) -> None:
        """Mark the alert `key` resolved (the condition cleared); never raises."""
        ...


class LogAlertSink:
    """The simplest sink: one structured log line per alert (`payflow.alert`), and one
    per resolution of a key this sink fired (a clean check resolves quietly)."""

    MAX_OPEN = 1000  # keys remembered as open; past it the oldest is forgotten

    def __init__(self) -> None:
        self._open: dict[str, None] = {}  # insertion-ordered: the oldest first

    async def fire(
        self,
        key: str,
        severity: Severity,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Log the alert at warning (info) or error (warning, critical) level."""
        emit = log.error if severity is not Severity.INFO else log.warning
        self._open.pop(key, None)
        self._open[key] = None
        if len(self._open) > self.MAX_OPEN:
            del self._open[next(iter(self._open))]
        emit(
            "payflow.alert",
            key=key,
            severity=severity.value,
            message=message,
            **dict(details or {}),
        )

    async def resolve(self, key: str) -> None:
        """Log the resolution of `key` if this sink fired it: a key that never fired
        resolves quietly, so `payflow.alert.resolved` is not logged every few seconds."""
        if key in self._open:
            del self._open[key]
            log.info("payflow.alert.resolved", key=key)
