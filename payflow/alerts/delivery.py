"""Alert delivery: how an operator is notified (`ALERT_DELIVERY` = log | webhook |
pagerduty). Delivery is only the notification; the `alerts` table is the record.

A delivery raises on failure (`httpx.HTTPError`, a non-2xx answer); the sink catches,
logs and swallows it, so no failure reaches the job that raised the alert.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

import httpx
import structlog

from payflow.alerts import Severity

log = structlog.get_logger("payflow.alerts")

Status = Literal["firing", "resolved"]

# PagerDuty Events API v2 severities are critical | error | warning | info.
PAGERDUTY_SEVERITY: dict[Severity, str] = {
    Severity.CRITICAL: "critical",
    Severity.WARNING: "warning",
    Severity.INFO: "info",
}


@dataclass(frozen=True, slots=True)
class AlertNotice:
    """What one notification says: the alert `key`, its latest severity/message/details,
    when the incident was first seen (None when the table could not be read), how many
    times it fired, and whether it is `firing` or `resolved`."""

    key: str
    severity: Severity
    message: str
    details: dict[str, Any]
    first_seen: datetime | None
    count: int
    status: Status

    def body(self) -> dict[str, Any]:
        """The generic webhook's JSON body."""
        return {
            "key": self.key,
            "severity": self.severity.value,
            "message": self.message,
            "details": self.details,
            "first_seen": self.first_seen.isoformat() if self.first_seen else None,
            "count": self.count,
            "status": self.status,
        }


class AlertDelivery(Protocol):
    """Sends one notice; raises on failure (the sink swallows it)."""

    async def send(self, notice: AlertNotice) -> None:
        """Notify about `notice`."""
        ...


class LogDelivery:
    """The default: one structured log line per notice (`payflow.alert`)."""

    async def send(self, notice: AlertNotice) -> None:
        """Log a firing notice at error (warning, critical) or warning (info) level."""
        if notice.status == "resolved":
            log.info("payflow.alert.resolved", key=notice.key, count=notice.count)
            return
        emit = log.error if notice.severity is not Severity.INFO else log.warning
        emit(
            "payflow.alert",
            key=notice.key,
            severity=notice.severity.value,
            message=notice.message,
            count=notice.count,
            details=notice.details,
        )


def describe_failure(error: BaseException) -> str:
    """A loggable description of a delivery failure: the error type and, for an HTTP
    answer, its status code. Never the URL (a webhook URL may embed a token) nor the
    request body (the PagerDuty routing key travels in it)."""
    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code}"
    return type(error).__name__


async def _post(url: str, body: dict[str, Any], timeout_s: float) -> None:
    """POST `body` as JSON; raise `httpx.HTTPError` on a transport error or non-2xx."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), follow_redirects=False) as c:
        response = await c.post(url, json=body)
        response.raise_for_status()


@dataclass(frozen=True, slots=True)
class WebhookDelivery:
    """POSTs `AlertNotice.body()` as JSON to the operator's `ALERT_WEBHOOK_URL`."""

    url: str
    timeout_s: float

    async def send(self, notice: AlertNotice) -> None:
        """POST the notice; raises `httpx.HTTPError` when the receiver fails."""
        await _post(self.url, notice.body(), self.timeout_s)


@dataclass(frozen=True, slots=True)
class PagerDutyDelivery:
    """PagerDuty Events API v2: a trigger or resolve event with `dedup_key` = the alert
    key, so PagerDuty groups the incident exactly as the `alerts` table does.

    The routing key is a secret: it travels only in the request body, is hidden from
    `repr` and is never logged.
    """

    url: str
    routing_key: str = field(repr=False)
    source: str
    timeout_s: float

    def event(self, notice: AlertNotice) -> dict[str, Any]:
        """The Events API v2 body for `notice`."""
        if notice.status == "resolved":
            return {
                "routing_key": self.routing_key,
                "event_action": "resolve",
                "dedup_key": notice.key,
            }
        custom: dict[str, Any] = {**notice.details, "count": notice.count}
        if notice.first_seen is not None:
            custom["first_seen"] = notice.first_seen.isoformat()
        return {
            "routing_key": self.routing_key,
            "event_action": "trigger",
            "dedup_key": notice.key,
            "payload": {
                "summary": f"[{notice.key}] {notice.message}"[:1024],
                "severity": PAGERDUTY_SEVERITY[notice.severity],
                "source": self.source,
                "component": "payflow",
                "custom_details": custom,
            },
        }

    async def send(self, notice: AlertNotice) -> None:
        """POST the event; raises `httpx.HTTPError` when PagerDuty refuses or is down."""
        await _post(self.url, self.event(notice), self.timeout_s)
