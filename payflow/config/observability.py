"""Logs and metrics: level and format, the Prometheus server of the background roles and
the state gauges' refresh (docs/operations.md#metrics)."""

from __future__ import annotations

from pydantic import Field, field_validator

from payflow.config.base import Slice, is_host


class ObservabilitySettings(Slice):
    """The `observability` slice (`settings.observability`); see the module's docstring."""

    slice_name = "observability"

    log_level: str = Field(default="INFO", pattern=r"(?i)^(DEBUG|INFO|WARNING|ERROR|CRITICAL)$")
    """Least severe level logged: DEBUG, INFO, WARNING, ERROR or CRITICAL."""
    log_json: bool = True
    """Structured logs as JSON lines with trace ids (false: human-readable console lines)."""
    log_cache_loggers: bool = True
    """Cache each logger's configuration on first use (fast); the test suite turns it off so a later
    reconfiguration (level, capture) always applies."""
    metrics_port: int = Field(default=9464, ge=0, le=65535)  # 0: no metrics server
    """Port of the Prometheus metrics server of the `relay`, `worker` and `scheduler` roles (`0`
    disables it; `payflow up` and `payflow api` serve `/metrics` on the API). A port that cannot
    be bound is logged in one line (`payflow.metrics.bind_failed`); the role keeps running."""
    metrics_host: str = "127.0.0.1"
    """Address that metrics server binds (`0.0.0.0` in a container)."""
    metrics_refresh_s: float = Field(default=15.0, ge=0)  # 0: state gauges not refreshed
    """How often each process re-reads the state gauges (events, payments, DLQ, outbox lag, zombies,
    queue depths) from PostgreSQL and RabbitMQ; the database snapshot is shared by all processes
    and retaken once it is older than half of this; `0` disables it."""
    metrics_refresh_timeout_s: float = Field(default=2.0, gt=0)
    """Time bound of one refresh per source; a scrape never waits on it."""

    @field_validator("metrics_host")
    @classmethod
    def _observability_bind_host_valid(cls, value: str) -> str:
        """A bind address is a host name or an IP literal (checked before any bind)."""
        if not is_host(value):
            raise ValueError(f"{value!r} is not a host name or IP address")
        return value
