"""Redis: caches, rate limits, circuit breakers, the gateway emulator's memory and the
DLQ fallback, under one key prefix."""

from __future__ import annotations

from pydantic import ValidationInfo, field_validator

from payflow.config.base import Slice, service_url


class RedisSettings(Slice):
    """The `redis` slice (`settings.redis`); the module's docstring says what it covers."""

    slice_name = "redis"

    redis_url: str = "redis://127.0.0.1:6379/0"
    """Caches, rate limits, circuit-breaker state, the gateway emulator's memory, the DLQ fallback
    while PostgreSQL is unreachable."""
    redis_key_prefix: str = "payflow:"
    """Prefix of every Redis key payflow writes (rate-limit counters; the gateway emulator's charges
    under `<prefix>gateway:charge:`; the DLQ fallback under `<prefix>dlq:fallback`,
    `<prefix>dlq:fallback:processing` and `<prefix>dlq:malformed`)."""

    @field_validator("redis_url")
    @classmethod
    def _redis_service_url_valid(cls, value: str, info: ValidationInfo) -> str | None:
        return service_url(value, info.field_name)
