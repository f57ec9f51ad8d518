"""Alerts: cooldown per key, bounded memory, and the delivery (log, webhook, PagerDuty)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from payflow.config.base import Slice, service_url


class AlertSettings(Slice):
    """The `alerts` slice (`settings.alerts`); the module's docstring says what it covers."""

    slice_name = "alerts"

    alert_cooldown_s: float = Field(default=300.0, ge=0)
    """An alert key is delivered at most once per this many seconds (repeats are counted in the
    `alerts` table); 0 delivers every firing."""
    alert_max_keys: int = Field(default=1000, ge=1, le=1_000_000)
    """Alert keys the sink remembers; stale ones are evicted first, then a new key's delivery is
    suppressed (`payflow.alerts.suppressed`)."""
    alert_delivery: Literal["log", "webhook", "pagerduty"] = "log"
    """How alerts are delivered: `log`, `webhook` or `pagerduty` (the `alerts` table is always
    written)."""
    alert_webhook_url: str | None = Field(
        default=None, pattern=r"^https?://", validate_default=True
    )
    """With `ALERT_DELIVERY=webhook`: where the JSON body `{key, severity, message, details,
    first_seen, count, status}` is POSTed (required then)."""
    alert_pagerduty_routing_key: SecretStr | None = Field(default=None, validate_default=True)
    """With `ALERT_DELIVERY=pagerduty`: the Events API v2 integration key (a secret; never logged;
    required then)."""
    alert_pagerduty_url: str = Field(
        default="https://events.pagerduty.com/v2/enqueue", pattern=r"^https?://"
    )
    """The PagerDuty Events API v2 endpoint."""
    alert_timeout_s: float = Field(default=5.0, gt=0, le=60)
    """Timeout of one delivery request and of acquiring a connection to record an alert."""

    @field_validator("alert_webhook_url", "alert_pagerduty_url")
    @classmethod
    def _alerts_service_url_valid(cls, value: str | None, info: ValidationInfo) -> str | None:
        return service_url(value, info.field_name)

    @field_validator("alert_webhook_url", "alert_pagerduty_routing_key")
    @classmethod
    def _alert_delivery_configured(
        cls, value: str | SecretStr | None, info: ValidationInfo
    ) -> str | SecretStr | None:
        """The delivery ALERT_DELIVERY names has what it needs (checked at start-up)."""
        needs = {"alert_webhook_url": "webhook", "alert_pagerduty_routing_key": "pagerduty"}
        secret = value.get_secret_value() if isinstance(value, SecretStr) else value
        if info.data.get("alert_delivery") == needs[str(info.field_name)] and not secret:
            raise ValueError(f"required when ALERT_DELIVERY={needs[str(info.field_name)]}")
        return value
