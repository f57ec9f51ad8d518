"""Merchant webhooks: the SSRF guard's exemptions, the HTTP client, in-flight bounds and
the send lease (docs/pipeline.md)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from typing import Annotated, ClassVar

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode

from payflow.config.base import Slice, is_host, split_csv

NAT64_PREFIX_LENGTHS = frozenset({32, 40, 48, 56, 64, 96})  # RFC 6052, section 2.2


def parse_nat64_prefixes(prefixes: Iterable[str]) -> tuple[ipaddress.IPv6Network, ...]:
    """The deployment's own NAT64 prefixes (`WEBHOOK_NAT64_PREFIXES`), e.g. `2001:db8:64::/96`.

    Raises `ValueError` for a prefix that is not IPv6 or whose length is not one of the
    RFC 6052 lengths (32, 40, 48, 56, 64, 96).
    """
    networks = []
    for text in prefixes:
        network = ipaddress.IPv6Network(text.strip())
        if network.prefixlen not in NAT64_PREFIX_LENGTHS:
            raise ValueError(f"NAT64 prefix {text!r} must be /32, /40, /48, /56, /64 or /96")
        networks.append(network)
    return tuple(networks)


def default_lease_s(timeout_s: float) -> float:
    """WEBHOOK_LEASE_S when unset: twice WEBHOOK_TIMEOUT_S, at least 30 s (30 s at the
    default 5 s timeout), so the lease always outlasts the send it guards."""
    return max(30.0, 2 * timeout_s)


class WebhookSettings(Slice):
    """The `webhooks` slice (`settings.webhooks`); the module's docstring says what it covers."""

    slice_name = "webhooks"
    derived_defaults: ClassVar[dict[str, str]] = {
        "webhook_lease_s": "max(30, 2 * WEBHOOK_TIMEOUT_S)"
    }

    webhook_allow_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    """Comma-separated hosts exempt from the webhook SSRF guard (`make run` allows
    127.0.0.1,localhost)."""
    webhook_timeout_s: float = Field(default=5.0, gt=0)
    """Timeout of one merchant webhook POST."""
    webhook_max_connections: int = Field(default=100, ge=1)
    """Connection pool of the webhook HTTP client (it never holds fewer than
    `WEBHOOK_MAX_IN_FLIGHT`)."""
    webhook_ca_bundle: str | None = None
    """PEM file of CA certificates that merchants' https webhook servers are verified against
    (unset: certifi's roots)."""
    webhook_nat64_prefixes: Annotated[tuple[str, ...], NoDecode] = ()
    """The deployment's own NAT64 prefixes (RFC 6052 lengths, e.g. `2001:db8:64::/96`); a webhook
    address under one is judged by the IPv4 address it embeds (`64:ff9b::/96` always is)."""
    # Webhook POSTs in flight per process (also the webhooks queue's prefetch); a send
    # holds no DB connection while it waits for the merchant.
    webhook_max_in_flight: int = Field(default=256, ge=1, le=10000)
    """Webhook sends in flight per worker process, also the `webhooks` queue's prefetch; independent
    of `DB_POOL_MAX` (a send holds a connection only for its two short transactions, never while
    the merchant answers)."""
    # How long a send's lease keeps other sends of the same job away; above the timeout.
    webhook_lease_s: float = Field(default=30.0, gt=0)
    """How long a send's lease keeps other sends of the same webhook away; must exceed
    `WEBHOOK_TIMEOUT_S` (unset: twice it, at least 30). A crashed send's webhook is sent again
    once it expires."""
    # The worker that finalizes a payment sends the webhook's first attempt, and its
    # event's first delivery to each endpoint, itself when a send slot is free, each job
    # held back as the guarantee (payflow.webhooks.direct, payflow.webhooks.endpoints.direct);
    # false: every job goes through the relay and the webhooks and endpoints queues.
    webhook_direct_send: bool = True
    """The worker that finalizes a payment POSTs the webhook's first attempt, and the first
    delivery of the payment's event to each of the merchant's endpoints, itself when a send slot is
    free, each job held back as the guarantee (docs/pipeline.md); `false`: every webhook and
    delivery goes through the relay and the `webhooks` and `endpoints` queues."""
    webhook_endpoint_rotation_overlap_s: float = Field(default=86400.0, ge=0, le=30 * 86400)
    """After a webhook endpoint's secret is rotated, how long every delivery to it carries the
    signatures of both the old and the new secret (seconds; docs/webhooks.md#rotating-a-secret)."""
    webhook_endpoint_disable_after_days: float = Field(default=5.0, gt=0, le=365)
    """A webhook endpoint whose deliveries have all failed for this many days is disabled by the
    scheduler job `disable_failing_endpoints`, with an alert (docs/webhooks.md#auto-disable)."""

    @field_validator("webhook_allow_hosts", "webhook_nat64_prefixes", mode="before")
    @classmethod
    def _webhooks_split_csv(cls, value: object) -> object:
        return split_csv(value)

    @field_validator("webhook_allow_hosts")
    @classmethod
    def _allow_hosts_are_hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Each entry is a host name or an IP literal, matched against a webhook URL's host."""
        for host in value:
            if not is_host(host.strip("[]")):
                raise ValueError(f"{host!r} is not a host name or IP address")
        return value

    @field_validator("webhook_ca_bundle")
    @classmethod
    def _ca_bundle_readable(cls, value: str | None) -> str | None:
        if value and not os.access(value, os.R_OK):
            raise ValueError("must name a readable PEM file of CA certificates")
        return value or None

    @field_validator("webhook_nat64_prefixes")
    @classmethod
    def _nat64_prefixes_valid(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        parse_nat64_prefixes(value)  # ValueError names the bad prefix
        return value

    @model_validator(mode="after")
    def _lease_outlasts_send(self) -> WebhookSettings:
        """A send is bounded by WEBHOOK_TIMEOUT_S; its lease must outlast it. Unset, the
        lease is derived from the timeout (`default_lease_s`); a lease set explicitly is
        checked."""
        if "webhook_lease_s" not in self.model_fields_set:
            object.__setattr__(self, "webhook_lease_s", default_lease_s(self.webhook_timeout_s))
        elif self.webhook_lease_s <= self.webhook_timeout_s:
            raise ValueError(
                f"WEBHOOK_LEASE_S is invalid: must exceed WEBHOOK_TIMEOUT_S "
                f"({self.webhook_timeout_s:g})"
            )
        return self
