"""RabbitMQ: the broker's URL, the names and kind of its queues, prefetch and the retry
tiers (docs/pipeline.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import NoDecode

from payflow.config.base import (
    SERVICE_URL_SCHEMES,
    Slice,
    check_service_url,
    service_url,
    split_csv,
)


class BrokerSettings(Slice):
    """The `broker` slice (`settings.broker`); the module's docstring says what it covers."""

    slice_name = "broker"

    rabbitmq_url: str = "amqp://guest:guest@127.0.0.1:5672/"
    """The broker (one node; for a cluster set RABBITMQ_URLS)."""
    rabbitmq_urls: Annotated[tuple[str, ...], NoDecode] = ()
    """The nodes of one RabbitMQ cluster, comma-separated (`amqp://u:p@mq1/,amqp://u:p@mq2/`):
    a connection tries them in order and, when it is lost, reconnects to the next one. Unset:
    RABBITMQ_URL alone. Every URL names the same vhost and credentials."""
    broker_connect_timeout_s: float = Field(default=10.0, gt=0)
    """How long one connection attempt to one broker node may take before the next node is
    tried."""
    # Prefixes every queue and exchange name (RabbitMQ allows 255 bytes, AMQP short-string
    # characters); refused at start-up rather than by the broker client mid-declare.
    broker_prefix: str = Field(default="payflow", pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    """Prefix of every RabbitMQ exchange and queue (see docs/pipeline.md)."""
    broker_quorum_queues: bool = True
    """Quorum queues (false: classic durable queues)."""
    broker_prefetch: int = Field(default=64, ge=1, le=10000)
    """Unacked messages per consumer of the `ledger` queue (the `payments` and `webhooks` queues
    take `GATEWAY_MAX_IN_FLIGHT` and `WEBHOOK_MAX_IN_FLIGHT`)."""
    retry_tiers_ms: Annotated[tuple[int, ...], NoDecode] = (2000, 4000, 8000)
    """Comma-separated delays; one TTL retry queue per value, so a message is attempted 1 + (number
    of tiers) times."""

    @field_validator("rabbitmq_url")
    @classmethod
    def _broker_service_url_valid(cls, value: str, info: ValidationInfo) -> str | None:
        return service_url(value, info.field_name)

    @field_validator("rabbitmq_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: object) -> object:
        return split_csv(value)

    @field_validator("rabbitmq_urls")
    @classmethod
    def _broker_urls_valid(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for url in value:
            check_service_url(url, SERVICE_URL_SCHEMES["rabbitmq_url"])
        return value

    def broker_urls(self) -> tuple[str, ...]:
        """The broker nodes to try, in order: RABBITMQ_URLS, else RABBITMQ_URL alone."""
        return self.rabbitmq_urls or (self.rabbitmq_url,)

    @field_validator("retry_tiers_ms", mode="before")
    @classmethod
    def _split_tiers(cls, value: object) -> object:
        if isinstance(value, str):
            parts = [part.strip() for part in value.split(",") if part.strip()]
            if not all(part.isascii() and part.isdigit() for part in parts):
                raise ValueError("must be whole numbers of milliseconds, comma-separated")
            return tuple(int(part) for part in parts)
        return value

    @field_validator("retry_tiers_ms")
    @classmethod
    def _tiers_positive(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(tier <= 0 for tier in value):
            raise ValueError("every retry tier must be a positive number of milliseconds")
        return value
