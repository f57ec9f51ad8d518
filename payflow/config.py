"""Settings, read once from the environment (and an optional `.env`).

Local defaults work against the services on 127.0.0.1. A setting that is
required by a role but missing or invalid stops that process with one line
naming it (see `load_settings`), never a traceback.
"""

from __future__ import annotations

import ipaddress
import os
import re
import sys
from decimal import Decimal
from typing import Annotated, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings import SettingsError as SourceError

# A host name of RFC 1123 labels; IP literals are judged by `ipaddress` (`is_host`).
HOST_NAME = re.compile(
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
    r"[A-Za-z0-9])?)*\.?"
)


def is_host(value: str) -> bool:
    """True for an IPv4 / IPv6 literal or a host name: what a bind address or an
    allow-listed webhook host can be."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return HOST_NAME.fullmatch(value) is not None
    return True


# The schemes each service URL accepts; a host is required unless the scheme allows a
# socket path (libpq's `host=` query, redis `unix://`).
SERVICE_URL_SCHEMES: dict[str, tuple[str, ...]] = {
    "database_url": ("postgresql", "postgres"),
    "database_direct_url": ("postgresql", "postgres"),
    "migration_database_url": ("postgresql", "postgres"),
    "redis_url": ("redis", "rediss", "unix"),
    "rabbitmq_url": ("amqp", "amqps"),
    "eth_rpc_url": ("http", "https"),
    "alert_webhook_url": ("http", "https"),
    "alert_pagerduty_url": ("http", "https"),
}
HOSTLESS_SCHEMES = frozenset({"postgresql", "postgres", "unix"})


def check_service_url(url: str, schemes: tuple[str, ...]) -> None:
    """Raise `ValueError` (its message names what is wrong, never the URL, which may
    hold a password) unless `url` has one of `schemes`, a host (or a scheme that
    allows a socket path) and a port within 1-65535 when one is given."""
    parts = urlsplit(url)
    if parts.scheme not in schemes:
        raise ValueError(f"must be a URL starting with {' or '.join(s + '://' for s in schemes)}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("has a port that is not a number within 1-65535") from None
    if port == 0:
        raise ValueError("has a port that is not a number within 1-65535")
    if not parts.hostname and parts.scheme not in HOSTLESS_SCHEMES:
        raise ValueError("names no host")


class SettingsError(Exception):
    """A setting is missing or invalid; the message names it in one line."""


class Settings(BaseSettings):
    """Every knob payflow has. The README's configuration table mirrors this class."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", frozen=True)

    # The service logs in as the APP role (least privilege, see docs/architecture.md);
    # migrations connect with MIGRATION_DATABASE_URL and run as DB_OWNER_ROLE.
    database_url: str = "postgresql://payflow_app@127.0.0.1:5432/payflow"
    # Behind PgBouncer in transaction pooling, DATABASE_URL points at PgBouncer and
    # DATABASE_DIRECT_URL at PostgreSQL itself, for the relay's LISTEN (a session).
    database_direct_url: str | None = None
    migration_database_url: str | None = None
    db_owner_role: str = Field(default="payflow_owner", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    processed_events_retention_days: int = Field(default=90, ge=0)
    redis_url: str = "redis://127.0.0.1:6379/0"
    rabbitmq_url: str = "amqp://guest:guest@127.0.0.1:5672/"

    db_pool_min: int = Field(default=2, ge=1)
    db_pool_max: int = Field(default=20, ge=1)
    # asyncpg's per-connection prepared-statement cache; 0 behind PgBouncer in
    # transaction pooling (named statements would land on another server connection).
    db_statement_cache_size: int = Field(default=100, ge=0)
    lock_timeout_ms: int = Field(default=2000, ge=1)
    statement_timeout_ms: int = Field(default=5000, ge=1)
    posting_max_attempts: int = Field(default=5, ge=1)

    api_key: str | None = None
    admin_api_key: str | None = None
    provider_webhook_secret: str | None = None
    provider_signature_header: str = "X-Alchemy-Signature"
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8000, ge=1, le=65535)
    api_workers: int = Field(default=1, ge=1)
    # NoDecode: comma-separated env values go to `_split_csv`, not the JSON decoder.
    fiat_currencies: Annotated[tuple[str, ...], NoDecode] = ("RUB", "USD", "EUR")
    idempotency_retention_hours: int = Field(default=24, ge=1)
    max_body_bytes: int = Field(default=65536, ge=1024)
    provider_max_body_bytes: int = Field(default=2_097_152, ge=1024)
    max_metadata_bytes: int = Field(default=4096, ge=2)
    rate_limit_per_minute: int = Field(default=60000, ge=1)
    # Requests per client address per minute whose X-API-Key resolves to no merchant;
    # past it the address gets 429 before any database lookup (docs/api.md).
    auth_failures_per_minute: int = Field(default=120, ge=1)
    webhook_allow_hosts: Annotated[tuple[str, ...], NoDecode] = ()

    recon_recent_minutes: int = Field(default=15, ge=1)
    log_level: str = Field(default="INFO", pattern=r"(?i)^(DEBUG|INFO|WARNING|ERROR|CRITICAL)$")
    log_json: bool = True
    log_cache_loggers: bool = True

    # --- pipeline
    # Prefixes every queue and exchange name (RabbitMQ allows 255 bytes, AMQP short-string
    # characters); refused at start-up rather than by the broker client mid-declare.
    broker_prefix: str = Field(default="payflow", pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    broker_quorum_queues: bool = True
    broker_prefetch: int = Field(default=64, ge=1, le=10000)
    retry_tiers_ms: Annotated[tuple[int, ...], NoDecode] = (2000, 4000, 8000)
    relay_batch_size: int = Field(default=200, ge=1, le=10000)
    relay_poll_interval_s: float = Field(default=5.0, gt=0)
    # Under load (the last pass found rows) a wake-up waits this long before claiming,
    # so rows committed meanwhile join the batch: fewer round trips per row. An idle
    # relay publishes a lone row at once. 0 turns it off.
    relay_linger_ms: float = Field(default=5.0, ge=0, le=1000)
    relay_retry_backoff_s: float = Field(default=1.0, gt=0)
    relay_retry_max_backoff_s: float = Field(default=300.0, gt=0)
    relay_unpublishable_alert_attempts: int = Field(default=5, ge=1)
    outbox_retention_hours: float = Field(default=24.0, ge=0)
    outbox_stale_alert_s: float = Field(default=60.0, gt=0)
    stale_event_timeout_s: float = Field(default=300.0, gt=0)
    max_event_retries: int = Field(default=10, ge=0)
    payment_sweep_after_s: float = Field(default=300.0, gt=0)
    webhook_sweep_after_s: float = Field(default=600.0, gt=0)
    sweep_max_backoff_s: float = Field(default=3600.0, gt=0)
    scheduler_interval_s: float = Field(default=5.0, gt=0)
    gateway_delay_min_s: float = Field(default=2.0, ge=0)
    gateway_delay_max_s: float = Field(default=5.0, ge=0)
    gateway_failure_rate: float = Field(default=0.1, ge=0, le=1)
    gateway_seed: int | None = None
    charge_lease_s: float = Field(default=10.0, gt=0)
    webhook_timeout_s: float = Field(default=5.0, gt=0)
    webhook_max_connections: int = Field(default=100, ge=1)
    webhook_ca_bundle: str | None = None
    webhook_nat64_prefixes: Annotated[tuple[str, ...], NoDecode] = ()
    # --- throughput: webhook leases and in-flight bounds (issue 10, docs/pipeline.md)
    # Webhook POSTs in flight per process (also the webhooks queue's prefetch); a send
    # holds no DB connection while it waits for the merchant.
    webhook_max_in_flight: int = Field(default=256, ge=1, le=10000)
    # How long a send's lease keeps other sends of the same job away; above the timeout.
    webhook_lease_s: float = Field(default=30.0, gt=0)
    # The worker that finalizes a payment sends the webhook's first attempt itself when
    # a send slot is free, its job held back as the guarantee (payflow.webhooks.direct);
    # false: every webhook job goes through the relay and the webhooks queue.
    webhook_direct_send: bool = True
    # Gateway calls in flight per process (also the payments queue's prefetch). Little's
    # law: 240 payments/s at a 3.5 s mean gateway delay needs 840 calls in flight.
    gateway_max_in_flight: int = Field(default=1000, ge=1, le=10000)
    # A payment's credit is posted by the worker that finalized it, right after the
    # commit; its ledger.event job is held back this long and published only if that
    # worker could not post it (it died, or the full path must decide). Above
    # LOCK_TIMEOUT_MS, so a post waiting on a hot account never races its own job.
    credit_hold_s: float = Field(default=15.0, ge=0, le=3600)
    shutdown_grace_s: float = Field(default=30.0, gt=0)
    # Redis DLQ fallback (issue 9): where on_dead hooks park entries while PostgreSQL is
    # unreachable, and how the scheduler's drain moves them back.
    dlq_fallback_ttl_s: int = Field(default=7 * 24 * 3600, ge=60)
    dlq_drain_batch: int = Field(default=100, ge=1, le=10000)
    dlq_drain_max_failures: int = Field(default=3, ge=1)

    # --- operations: scheduled jobs and `payflow status` (issue 9, docs/operations.md)
    recon_hot_interval_s: float = Field(default=60.0, gt=0)
    recon_full_interval_s: float = Field(default=86400.0, gt=0)
    checks_interval_s: float = Field(default=60.0, gt=0)
    zombie_processing_s: float = Field(default=300.0, gt=0)
    zombie_pending_s: float = Field(default=900.0, gt=0)
    zombie_payment_pending_s: float = Field(default=1800.0, gt=0)
    zombie_webhook_s: float = Field(default=3600.0, gt=0)
    dlq_growth_window_s: float = Field(default=3600.0, gt=0)
    dlq_growth_threshold: int = Field(default=10, ge=0)
    stuck_claim_after_s: float = Field(default=600.0, gt=0)
    processed_events_cleanup_batch: int = Field(default=5000, ge=1, le=10000)
    processed_events_cleanup_max_batches: int = Field(default=20, ge=1)
    processed_events_cleanup_pause_s: float = Field(default=0.2, ge=0)
    job_runs_retention_days: float = Field(default=7.0, gt=0)
    # Webhook attempt log retention (`cleanup_webhook_attempt_log`, migration 0019): rows
    # older than this many days go (the function never goes below 1 day); 0 keeps them.
    webhook_attempt_log_retention_days: int = Field(default=30, ge=0, le=36500)
    webhook_attempt_log_cleanup_batch: int = Field(default=5000, ge=1, le=10000)
    webhook_attempt_log_cleanup_max_batches: int = Field(default=20, ge=1)
    status_dlq_max_unresolved: int = Field(default=0, ge=0)
    status_outbox_max_lag_s: float = Field(default=60.0, gt=0)
    status_outbox_max_unpublished: int = Field(default=10000, ge=0)
    status_broker_timeout_s: float = Field(default=3.0, gt=0)

    # --- chain truth: deposits verified against the node (issue 8, docs/chain.md)
    # ETH_RPC_URL unset: chain features are off and deposits wait, observed, never credited.
    eth_rpc_url: str | None = Field(default=None, pattern=r"^https?://")
    # "finalized" (the block tag) or "confirmations:N" (head - N); see docs/chain.md.
    eth_confirmation_policy: str = Field(
        default="finalized", pattern=r"^(finalized|confirmations:[0-9]{1,5})$"
    )
    rpc_timeout_s: float = Field(default=5.0, gt=0, le=120)
    # More EVM chains by configuration: {"NAME": {"rpc_url": "...", "policy": "..."}}.
    evm_chains: dict[str, dict[str, str]] = Field(default_factory=dict)
    chain_breaker_failures: int = Field(default=3, ge=1)
    chain_breaker_open_s: float = Field(default=30.0, gt=0)
    chain_cache_final_ttl_s: int = Field(default=7 * 24 * 3600, ge=1)
    chain_cache_recent_ttl_s: float = Field(default=2.0, gt=0)
    chain_deposits_interval_s: float = Field(default=3.0, gt=0)
    chain_deposits_batch: int = Field(default=200, ge=1, le=10000)
    chain_recheck_s: float = Field(default=3.0, gt=0)
    chain_report_grace_s: float = Field(default=900.0, ge=0)
    chain_orphan_recheck_s: float = Field(default=3600.0, ge=0)
    chain_reorg_watch_blocks: int = Field(default=64, ge=0)
    recon_chain_interval_s: float = Field(default=86400.0, gt=0)
    recon_chain_window_blocks: int = Field(default=7200, ge=1)
    recon_chain_block_span: int = Field(default=1000, ge=1, le=100000)
    recon_chain_address_batch: int = Field(default=100, ge=1, le=1000)

    # --- metrics (docs/operations.md#metrics)
    metrics_port: int = Field(default=9464, ge=0, le=65535)  # 0: no metrics server
    metrics_host: str = "127.0.0.1"
    metrics_refresh_s: float = Field(default=15.0, ge=0)  # 0: state gauges not refreshed
    metrics_refresh_timeout_s: float = Field(default=2.0, gt=0)

    # --- chain scanner and derived deposit addresses (issue 8, docs/chain.md)
    # Account-level xpub of m/44'/60'/0'; deposit address i is child 0/i. Public only.
    eth_deposit_xpub: str | None = Field(
        default=None, pattern=r"^[xt]pub[1-9A-HJ-NP-Za-km-z]{100,112}$"
    )
    eth_scanner_lag_blocks: int = Field(default=3, ge=0, le=10000)
    eth_scanner_poll_interval_s: float = Field(default=2.0, gt=0)
    eth_scanner_batch_blocks: int = Field(default=50, ge=1, le=2000)
    eth_scanner_address_batch: int = Field(default=500, ge=1, le=10000)
    # First cursor when the chain has none (unset: head - lag; older blocks are recon's).
    eth_scanner_start_block: int | None = Field(default=None, ge=0)
    eth_scanner_keep_blocks: int = Field(default=256, ge=8, le=100000)
    eth_scanner_writers: int = Field(default=4, ge=1, le=32)  # connections observing at once

    # --- api
    redis_key_prefix: str = "payflow:"
    api_auth_cache_seconds: float = Field(default=30.0, ge=0)
    api_ready_timeout_seconds: float = Field(default=2.0, gt=0)
    default_chain: str = Field(default="ETH_MAINNET", pattern=r"^[A-Z0-9_]{2,40}$")

    # --- payouts (issue 11, docs/payouts.md): holds, hot wallet, signing, fee bumps
    # The chain the hot wallet pays on: a `chains` row with an RPC in ETH_RPC_URL/EVM_CHAINS.
    payout_chain: str = "ETH_MAINNET"
    eth_hot_wallet_key: SecretStr | None = None  # hex private key, local runs only
    eth_hot_wallet_keystore: str | None = None  # an encrypted keystore (JSON) file
    eth_hot_wallet_keystore_password: SecretStr | None = None
    payout_max_fee_per_gas_wei: int = Field(default=100_000_000_000, gt=0)  # the held ceiling
    payout_priority_fee_wei: int = Field(default=1_000_000_000, ge=0)
    payout_native_gas_limit: int = Field(default=21_000, ge=21_000)
    payout_token_gas_limit: int = Field(default=100_000, ge=21_000)
    payout_token_fee: Decimal = Field(default=Decimal(0), ge=0)  # per token payout, its units
    payout_stuck_after_s: float = Field(default=120.0, ge=0)
    payout_fee_bump_percent: int = Field(default=25, ge=10, le=500)
    payout_interval_s: float = Field(default=5.0, gt=0)
    payout_batch_size: int = Field(default=100, ge=1, le=10000)

    # --- alerts (payflow/ops/alerting): cooldown per key, bounded memory, delivery
    alert_cooldown_s: float = Field(default=300.0, ge=0)
    alert_max_keys: int = Field(default=1000, ge=1, le=1_000_000)
    alert_delivery: Literal["log", "webhook", "pagerduty"] = "log"
    alert_webhook_url: str | None = Field(
        default=None, pattern=r"^https?://", validate_default=True
    )
    alert_pagerduty_routing_key: SecretStr | None = Field(default=None, validate_default=True)
    alert_pagerduty_url: str = Field(
        default="https://events.pagerduty.com/v2/enqueue", pattern=r"^https?://"
    )
    alert_timeout_s: float = Field(default=5.0, gt=0, le=60)

    # --- console (issue 12)
    console_enabled: bool = True
    # Signs the session cookie; empty: derived from PROVIDER_WEBHOOK_SECRET (same on every replica).
    console_secret: SecretStr | None = Field(default=None, min_length=32)
    console_session_ttl_s: float = Field(default=8 * 3600.0, ge=60, le=30 * 86400)
    # auto: Secure when the request came over HTTPS (or X-Forwarded-Proto: https).
    console_cookie_secure: Literal["auto", "always", "never"] = "auto"
    console_signin_max_failures: int = Field(default=5, ge=1, le=1000)
    console_signin_window_s: int = Field(default=300, ge=10, le=86400)
    console_page_size: int = Field(default=50, ge=5, le=500)

    @field_validator("provider_webhook_secret")
    @classmethod
    def _secret_long_enough(cls, value: str | None) -> str | None:
        if value is not None and len(value) < 32:
            raise ValueError("must be at least 32 characters")
        return value

    @field_validator(
        "database_url",
        "database_direct_url",
        "migration_database_url",
        "redis_url",
        "rabbitmq_url",
        "eth_rpc_url",
        "alert_webhook_url",
        "alert_pagerduty_url",
    )
    @classmethod
    def _service_url_valid(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A service URL is checked whole at start-up (scheme, host, port), so a typo
        stops the process with one line naming the setting instead of surfacing later
        as a client library's traceback or an endless reconnect loop."""
        if value is None:
            return None
        check_service_url(value, SERVICE_URL_SCHEMES[str(info.field_name)])
        return value

    @model_validator(mode="after")
    def _chains_valid(self) -> Settings:
        """EVM_CHAINS (and ETH_CONFIRMATION_POLICY) parse whichever role starts."""
        from payflow.chain.config import chain_configs

        try:
            chain_configs(self)
        except SettingsError as error:  # one line already; a ValueError for pydantic
            raise ValueError(str(error).removeprefix("setting ")) from None
        return self

    @field_validator(
        "fiat_currencies", "webhook_allow_hosts", "webhook_nat64_prefixes", mode="before"
    )
    @classmethod
    def _split_csv(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("fiat_currencies")
    @classmethod
    def _fiat_currencies_named(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """At least one ISO 4217 code: with none, no payment could ever be accepted."""
        if not value:
            raise ValueError("must name at least one currency, such as USD")
        for code in value:
            if not (len(code) == 3 and code.isascii() and code.isalpha() and code.isupper()):
                raise ValueError(f"{code!r} is not an ISO 4217 code such as USD")
        return value

    @field_validator("api_host", "metrics_host")
    @classmethod
    def _bind_host_valid(cls, value: str) -> str:
        """A bind address is a host name or an IP literal (checked before any bind)."""
        if not is_host(value):
            raise ValueError(f"{value!r} is not a host name or IP address")
        return value

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
        from payflow.webhooks.ssrf import parse_nat64_prefixes

        parse_nat64_prefixes(value)  # ValueError names the bad prefix
        return value

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

    @field_validator("webhook_lease_s")
    @classmethod
    def _lease_outlasts_send(cls, value: float, info: ValidationInfo) -> float:
        """A send is bounded by WEBHOOK_TIMEOUT_S; its lease must outlast it."""
        timeout = info.data.get("webhook_timeout_s")
        if timeout is not None and value <= timeout:
            raise ValueError(f"must exceed WEBHOOK_TIMEOUT_S ({timeout:g})")
        return value

    @field_validator("credit_hold_s")
    @classmethod
    def _hold_below_stale_alert(cls, value: float, info: ValidationInfo) -> float:
        """A held credit job is unpublished on purpose; it must not look stale."""
        stale = info.data.get("outbox_stale_alert_s")
        if stale is not None and value >= stale:
            raise ValueError(f"must stay below OUTBOX_STALE_ALERT_S ({stale:g})")
        return value

    @model_validator(mode="after")
    def _direct_webhook_hold_below_stale_alert(self) -> Settings:
        """A direct send's webhook job is unpublished on purpose for its lease, then (after
        a failure) the first retry tier; it must not look stale."""
        if self.webhook_direct_send:
            held_s = self.webhook_lease_s + (
                self.retry_tiers_ms[0] / 1000 if self.retry_tiers_ms else 0
            )
            if held_s >= self.outbox_stale_alert_s:
                raise ValueError(
                    f"WEBHOOK_LEASE_S plus the first of RETRY_TIERS_MS ({held_s:g} s) must stay "
                    f"below OUTBOX_STALE_ALERT_S ({self.outbox_stale_alert_s:g}) while "
                    "WEBHOOK_DIRECT_SEND is on"
                )
        return self

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

    def migration_url(self) -> str:
        """The URL migrations connect with: MIGRATION_DATABASE_URL, or by default the
        `postgres` superuser on DATABASE_URL's server and database (trust auth locally)."""
        if self.migration_database_url:
            return self.migration_database_url
        parts = urlsplit(self.database_url)
        host = parts.hostname or ""
        netloc = "postgres@" + (f"[{host}]" if ":" in host else host)
        if parts.port:
            netloc += f":{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def direct_url(self) -> str:
        """The URL of a session the relay may LISTEN on: DATABASE_DIRECT_URL, or by
        default DATABASE_URL (right when DATABASE_URL reaches PostgreSQL directly)."""
        return self.database_direct_url or self.database_url

    def require(self, *names: str) -> None:
        """Raise `SettingsError` naming the first of `names` that is unset."""
        for name in names:
            if getattr(self, name) in (None, ""):
                raise SettingsError(f"setting {name.upper()} is required but missing")


def load_settings(**overrides: object) -> Settings:
    """Build settings from the environment; raise `SettingsError` with one line on failure."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(part) for part in first["loc"]).upper()
        message = str(first["msg"]).removeprefix("Value error, ")
        if not name:  # a check across settings: its message names them
            raise SettingsError(f"setting {message}") from None
        raise SettingsError(f"setting {name} is invalid: {message}") from None
    except SourceError as exc:
        raise SettingsError(str(exc).split(":")[0]) from None


def exit_on_settings_error(error: SettingsError) -> None:
    """Print the one-line reason and stop the process, with no traceback."""
    print(f"payflow: {error}", file=sys.stderr)
    raise SystemExit(2)
