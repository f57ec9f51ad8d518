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
    """Every knob payflow has. Each setting's docstring is its description, from which
    docs/configuration.md is generated (`uv run python -m payflow.config_docs`)."""

    model_config = SettingsConfigDict(
        env_file=".env", extra="ignore", frozen=True, use_attribute_docstrings=True
    )

    # The service logs in as the APP role (least privilege, see docs/architecture.md);
    # migrations connect with MIGRATION_DATABASE_URL and run as DB_OWNER_ROLE.
    database_url: str = "postgresql://payflow_app@127.0.0.1:5432/payflow"
    """PostgreSQL, the source of truth. Its user is the service's (app) role, never a superuser or
    the owner (docs/architecture.md#database-roles)."""
    database_direct_url: str | None = None
    """PostgreSQL itself (same app role), for the one connection that needs a session: the relay's
    LISTEN. Unset: DATABASE_URL. Set it when DATABASE_URL goes through PgBouncer in transaction
    pooling; otherwise the relay LISTENs through PgBouncer, gets no notifications and publishes
    on its RELAY_POLL_INTERVAL_S poll alone (docs/operations.md, "PgBouncer")."""
    migration_database_url: str | None = None
    """The login `payflow migrate` uses: a superuser, or a role with CREATEROLE and CREATEDB. Unset:
    DATABASE_URL's server and database as user `postgres`."""
    db_owner_role: str = Field(default="payflow_owner", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    """The role that owns every table, sequence and function; migrations run as it."""
    processed_events_retention_days: int = Field(default=90, ge=0)
    """Posting claims of finished events older than this are deleted (never below 14 days; 0 keeps
    them)."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """Caches, rate limits, circuit-breaker state, the gateway emulator's memory, the DLQ fallback
    while PostgreSQL is unreachable."""
    rabbitmq_url: str = "amqp://guest:guest@127.0.0.1:5672/"
    """The broker."""

    db_pool_min: int = Field(default=2, ge=1)
    """Connections each process keeps open in its pool, at least."""
    db_pool_max: int = Field(default=20, ge=1)
    """Connections each process may open in its pool, at most."""
    db_statement_cache_size: int = Field(default=100, ge=0)
    """Prepared statements asyncpg caches per connection; **0 behind PgBouncer in transaction (or
    statement) pooling**: a named statement prepared on one server connection is missing on the
    next one (PgBouncer 1.18, Debian bookworm's; from 1.21 `max_prepared_statements` could keep
    the cache, untested here)."""
    lock_timeout_ms: int = Field(default=2000, ge=1)
    """`SET LOCAL lock_timeout` of every transaction: how long a posting queues on a hot account
    row."""
    statement_timeout_ms: int = Field(default=5000, ge=1)
    """`SET LOCAL statement_timeout` of every transaction."""
    posting_max_attempts: int = Field(default=5, ge=1)
    """Attempts of a posting on retryable errors (lock or statement timeout, deadlock,
    serialization)."""

    api_key: str | None = None
    """Bootstrap merchant key for local runs and tests."""
    admin_api_key: str | None = None
    """Operator key for admin endpoints."""
    provider_webhook_secret: str | None = None
    """HMAC secret of provider webhooks; at least 32 characters, required by the API."""
    provider_signature_header: str = "X-Alchemy-Signature"
    """Header carrying the provider's hex HMAC-SHA256."""
    api_host: str = "127.0.0.1"
    """Address the API's uvicorn binds."""
    api_port: int = Field(default=8000, ge=1, le=65535)
    """Port the API's uvicorn listens on."""
    api_workers: int = Field(default=1, ge=1)
    """How many uvicorn worker processes serve the API."""
    api_header_timeout_s: float = Field(default=10.0, gt=0, le=300)
    """A request's head must arrive within this many seconds of the connection's start (of its
    first byte on a keep-alive connection), however slowly it trickles; else 408 and the
    connection is closed (docs/operations.md, slow clients)."""
    api_body_timeout_s: float = Field(default=30.0, gt=0, le=600)
    """A request's body must arrive within this many seconds of its head; else the connection is
    closed."""
    api_max_connections: int = Field(default=0, ge=0)
    """Open connections per API process; 0: the open-file limit (raised to the hard limit at start)
    less 128 for pools and logs. At the cap a new connection evicts the one that has waited
    longest for its request head, else it gets 503."""
    # NoDecode: comma-separated env values go to `_split_csv`, not the JSON decoder.
    fiat_currencies: Annotated[tuple[str, ...], NoDecode] = ("RUB", "USD", "EUR")
    """Comma-separated currencies merchant payments accept: ISO 4217 codes, each with an `assets`
    row (the API refuses to start, naming the ones without)."""
    idempotency_retention_hours: int = Field(default=24, ge=1)
    """How long `api_idempotency` records are kept (the scheduler's `cleanup_idempotency_keys`
    deletes older ones); a later retry is judged against the payment or withdrawal event the key
    made."""
    max_body_bytes: int = Field(default=65536, ge=1024)
    """Request body cap (413 above)."""
    provider_max_body_bytes: int = Field(default=2_097_152, ge=1024)
    """Body cap of the provider webhook alone (413 above). A refused delivery is retried unchanged
    until the provider gives up, losing its deposits, so keep it above the provider's largest
    batch (Alchemy sends about 1 KB per activity); activities are not counted, each one lands."""
    max_metadata_bytes: int = Field(default=4096, ge=2)
    """Cap on a payment's `metadata` JSON."""
    rate_limit_per_minute: int = Field(default=60000, ge=1)
    """Requests per client per minute (429 above)."""
    auth_failures_per_minute: int = Field(default=120, ge=1)
    """X-API-Keys that resolve to no merchant, per client address per minute; above it that
    address's unresolved keys are 429 before any database lookup."""
    webhook_allow_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    """Comma-separated hosts exempt from the webhook SSRF guard (`make run` allows
    127.0.0.1,localhost)."""

    recon_recent_minutes: int = Field(default=15, ge=1)
    """Window of the hot-path reconciliation."""
    log_level: str = Field(default="INFO", pattern=r"(?i)^(DEBUG|INFO|WARNING|ERROR|CRITICAL)$")
    """Least severe level logged: DEBUG, INFO, WARNING, ERROR or CRITICAL."""
    log_json: bool = True
    """Structured logs as JSON lines with trace ids (false: human-readable console lines)."""
    log_cache_loggers: bool = True
    """Cache each logger's configuration on first use (fast); the test suite turns it off so a later
    reconfiguration (level, capture) always applies."""

    # --- pipeline
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
    relay_batch_size: int = Field(default=200, ge=1, le=10000)
    """Outbox rows per relay pass."""
    relay_poll_interval_s: float = Field(default=5.0, gt=0)
    """Relay fallback poll when no NOTIFY arrives."""
    # Under load (the last pass found rows) a wake-up waits this long before claiming,
    # so rows committed meanwhile join the batch: fewer round trips per row. An idle
    # relay publishes a lone row at once. 0 turns it off.
    relay_linger_ms: float = Field(default=5.0, ge=0, le=1000)
    """A busy relay (its last pass, or one of the 4 before it, found rows) claims again this long
    later without waiting for a wake-up, so rows committing meanwhile share a batch; an idle
    relay publishes a woken row at once (0: busy passes back to back)."""
    relay_retry_backoff_s: float = Field(default=1.0, gt=0)
    """First wait before an outbox row the broker refused (unroutable, nacked) is tried again; the
    n-th wait is min(this * 2^n, RELAY_RETRY_MAX_BACKOFF_S). Rows behind it are not delayed."""
    relay_retry_max_backoff_s: float = Field(default=300.0, gt=0)
    """Cap of the doubling wait between two publishes of an outbox row the broker refused."""
    relay_unpublishable_alert_attempts: int = Field(default=5, ge=1)
    """The N-th and every later refused publish of one row logs `payflow.outbox.unpublishable`
    (error)."""
    outbox_retention_hours: float = Field(default=24.0, ge=0)
    """Published outbox rows older than this are deleted (0 keeps them)."""
    outbox_stale_alert_s: float = Field(default=60.0, gt=0)
    """Unpublished rows older than this log `payflow.outbox.stale`."""
    stale_event_timeout_s: float = Field(default=300.0, gt=0)
    """A ledger event left unfinished this long is re-announced (first wait; doubles per
    re-announcement)."""
    max_event_retries: int = Field(default=10, ge=0)
    """Alert threshold, not a failure: the N-th and every later re-announcement of one subject
    (event, payment, webhook job) logs `payflow.events.waiting` / `payflow.payments.waiting` /
    `payflow.webhooks.waiting`; nothing is failed for waiting."""
    payment_sweep_after_s: float = Field(default=300.0, gt=0)
    """A payment still `pending` this long is re-announced (`payment.created`)."""
    webhook_sweep_after_s: float = Field(default=600.0, gt=0)
    """A final payment's webhook neither delivered nor dead-lettered this long after `processed_at`
    is re-announced (`webhook.deliver`)."""
    sweep_max_backoff_s: float = Field(default=3600.0, gt=0)
    """Cap of the doubling wait between two re-announcements of one subject."""
    scheduler_interval_s: float = Field(default=5.0, gt=0)
    """Scheduler tick."""
    gateway_delay_min_s: float = Field(default=2.0, ge=0)
    """The gateway emulator's shortest latency per charge."""
    gateway_delay_max_s: float = Field(default=5.0, ge=0)
    """The gateway emulator's longest latency per charge."""
    gateway_failure_rate: float = Field(default=0.1, ge=0, le=1)
    """Share of payments the emulator declines."""
    gateway_seed: int | None = None
    """Seed of the emulator's per-payment decision (SHA-256 of seed and payment id)."""
    charge_lease_s: float = Field(default=10.0, gt=0)
    """How long a claimed gateway charge belongs to its worker (and the gateway call's timeout); an
    unanswered claim older than this is taken over by the next delivery, which asks the gateway
    for the outcome. Keep it above the gateway's worst latency and below the sum of
    `RETRY_TIERS_MS`."""
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
    # --- throughput: webhook leases and in-flight bounds (docs/pipeline.md)
    # Webhook POSTs in flight per process (also the webhooks queue's prefetch); a send
    # holds no DB connection while it waits for the merchant.
    webhook_max_in_flight: int = Field(default=256, ge=1, le=10000)
    """Webhook sends in flight per worker process, also the `webhooks` queue's prefetch; independent
    of `DB_POOL_MAX` (a send holds a connection only for its two short transactions, never while
    the merchant answers)."""
    # How long a send's lease keeps other sends of the same job away; above the timeout.
    webhook_lease_s: float = Field(default=30.0, gt=0)
    """How long a send's lease keeps other sends of the same webhook away; must exceed
    `WEBHOOK_TIMEOUT_S`. A crashed send's webhook is sent again once it expires."""
    # The worker that finalizes a payment sends the webhook's first attempt itself when
    # a send slot is free, its job held back as the guarantee (payflow.webhooks.direct);
    # false: every webhook job goes through the relay and the webhooks queue.
    webhook_direct_send: bool = True
    """The worker that finalizes a payment POSTs the webhook's first attempt itself when a send slot
    is free, its job held back as the guarantee (docs/pipeline.md); `false`: every webhook goes
    through the relay and the `webhooks` queue."""
    # Gateway calls in flight per process (also the payments queue's prefetch). Little's
    # law: 240 payments/s at a 3.5 s mean gateway delay needs 840 calls in flight.
    gateway_max_in_flight: int = Field(default=1000, ge=1, le=10000)
    """Gateway calls in flight per worker process, also the `payments` queue's prefetch; independent
    of `BROKER_PREFETCH` (ledger) and `DB_POOL_MAX` (a call holds no connection). Size it by
    Little's law: payments/s wanted * mean gateway latency."""
    # A payment's credit is posted by the worker that finalized it, right after the
    # commit; its ledger.event job is held back this long and published only if that
    # worker could not post it (it died, or the full path must decide). Above
    # LOCK_TIMEOUT_MS, so a post waiting on a hot account never races its own job.
    credit_hold_s: float = Field(default=15.0, ge=0, le=3600)
    """The finalizing worker posts a payment's credit itself: normally in the finalize's own commit
    (no job at all); when that statement cannot post (a contended or refused balance change), the
    credit's `ledger.event` job is held back this long while the worker posts it right after the
    commit; the relay publishes it only if that worker died or the full posting path must decide
    (an overflow). Keep it above `LOCK_TIMEOUT_MS`; it must stay below `OUTBOX_STALE_ALERT_S`;
    `0` turns both shortcuts off (the ledger worker posts every credit)."""
    shutdown_grace_s: float = Field(default=30.0, gt=0)
    """How long SIGTERM waits for in-flight messages."""
    # Redis DLQ fallback: where on_dead hooks park entries while PostgreSQL is
    # unreachable, and how the scheduler's drain moves them back.
    dlq_fallback_ttl_s: int = Field(default=7 * 24 * 3600, ge=60)
    """TTL (7 days by default) of the Redis list `<REDIS_KEY_PREFIX>dlq:fallback` that holds dead
    letters recorded while PostgreSQL was unreachable; refreshed by each push
    (docs/operations.md, "Redis DLQ fallback")."""
    dlq_drain_batch: int = Field(default=100, ge=1, le=10000)
    """Entries the `drain_redis_dlq` job moves back into `dead_letter_queue` per run,
    oldest first."""
    dlq_drain_max_failures: int = Field(default=3, ge=1)
    """Consecutive failed entries after which the drain stops and alerts
    `dlq.fallback.drain_failed`."""

    # --- operations: scheduled jobs and `payflow status` (docs/operations.md)
    recon_hot_interval_s: float = Field(default=60.0, gt=0)
    """How often the scheduler's `recon_hot` job reconciles recently touched accounts."""
    recon_full_interval_s: float = Field(default=86400.0, gt=0)
    """How often `recon_full` reconciles every account and looks for duplicate / missing ledger
    rows."""
    checks_interval_s: float = Field(default=60.0, gt=0)
    """How often the checks `check_zombies`, `check_dlq_growth` and `check_stuck_claims` run."""
    zombie_processing_s: float = Field(default=300.0, gt=0)
    """A ledger event `processing` longer than this is a zombie (alert
    `zombies:events_processing`)."""
    zombie_pending_s: float = Field(default=900.0, gt=0)
    """A ledger event `pending`/`enqueued` longer than this is a zombie (alert
    `zombies:events_waiting`)."""
    zombie_payment_pending_s: float = Field(default=1800.0, gt=0)
    """A merchant payment `pending` longer than this is a zombie (alert
    `zombies:payments_pending`)."""
    zombie_webhook_s: float = Field(default=3600.0, gt=0)
    """A final payment's webhook neither delivered nor dead-lettered this long after `processed_at`
    is a zombie (alert `zombies:webhooks_undelivered`)."""
    dlq_growth_window_s: float = Field(default=3600.0, gt=0)
    """Window of the `dlq.growth` check: more than DLQ_GROWTH_THRESHOLD dead letters created within
    it fires the alert."""
    dlq_growth_threshold: int = Field(default=10, ge=0)
    """Dead letters created within DLQ_GROWTH_WINDOW_S above which `dlq.growth` fires."""
    stuck_claim_after_s: float = Field(default=600.0, gt=0)
    """A `processed_events` claim still `pending` this long breaks an invariant (critical alert
    `claims.stuck`)."""
    processed_events_cleanup_batch: int = Field(default=5000, ge=1, le=10000)
    """Claims deleted per batch by `cleanup_processed_events` (1-10,000)."""
    processed_events_cleanup_max_batches: int = Field(default=20, ge=1)
    """Batches per run of `cleanup_processed_events`; the next run continues."""
    processed_events_cleanup_pause_s: float = Field(default=0.2, ge=0)
    """Pause between two batches of `cleanup_processed_events`."""
    job_runs_retention_days: float = Field(default=7.0, gt=0)
    """`job_runs` rows older than this are deleted (job `cleanup_job_runs`)."""
    # Webhook attempt log retention (`cleanup_webhook_attempt_log`, migration 0019): rows
    # older than this many days go (the function never goes below 1 day); 0 keeps them.
    webhook_attempt_log_retention_days: int = Field(default=30, ge=0, le=36500)
    """Webhook attempt log rows (`webhook_attempt_log`) older than this are deleted by
    `cleanup_webhook_attempt_log` (never below 1 day; 0 keeps them)."""
    webhook_attempt_log_cleanup_batch: int = Field(default=5000, ge=1, le=10000)
    """Attempt rows deleted per batch by `cleanup_webhook_attempt_log` (1-10,000)."""
    webhook_attempt_log_cleanup_max_batches: int = Field(default=20, ge=1)
    """Batches per run of `cleanup_webhook_attempt_log`; the next run continues."""
    status_dlq_max_unresolved: int = Field(default=0, ge=0)
    """`payflow status` reports wrong when more dead letters than this are unresolved."""
    status_outbox_max_lag_s: float = Field(default=60.0, gt=0)
    """`payflow status` reports wrong when the oldest unpublished outbox row is older than this."""
    status_outbox_max_unpublished: int = Field(default=10000, ge=0)
    """`payflow status` reports wrong when more outbox rows than this are unpublished."""
    status_broker_timeout_s: float = Field(default=3.0, gt=0)
    """How long `payflow status` waits for RabbitMQ before showing the queues as unknown (and
    wrong)."""

    # --- chain truth: deposits verified against the node (docs/chain.md)
    # ETH_RPC_URL unset: chain features are off and deposits wait, observed, never credited.
    eth_rpc_url: str | None = Field(default=None, pattern=r"^https?://")
    """The Ethereum node (JSON-RPC over http/https) of chain `ETH_MAINNET`; unset: chain features
    are off and reported deposits wait, never credited unverified (docs/chain.md)."""
    # "finalized" (the block tag) or "confirmations:N" (head - N); see docs/chain.md.
    eth_confirmation_policy: str = Field(
        default="finalized", pattern=r"^(finalized|confirmations:[0-9]{1,5})$"
    )
    """When an `ETH_MAINNET` block is final: `finalized` (the node's tag) or `confirmations:N` (head
    - N); `safe` is refused (docs/chain.md#policies)."""
    eth_chain_id: int = Field(default=1, gt=0)
    """The EIP-155 chain id ETH_RPC_URL's node must answer to `eth_chainId` (and the `chains` row of
    ETH_MAINNET must hold): another network stops chain work in one line."""
    rpc_timeout_s: float = Field(default=5.0, gt=0, le=120)
    """Bound of every JSON-RPC request to a node."""
    evm_chains: dict[str, dict[str, str | int]] = Field(default_factory=dict)
    """More EVM chains by configuration: JSON `{"NAME": {"rpc_url": "…", "policy":
    "finalized|confirmations:N", "chain_id": 137}}` (`chain_id` required; register the chain and its
    tokens with `payflow tokens`)."""
    chain_identity_recheck_s: float = Field(default=300.0, gt=0)
    """How long a node's identity (`eth_chainId`) and capabilities (the policy's tag) stay checked
    before a long-running process (the scanner) asks again."""
    chain_assignment_slack_s: float = Field(default=60.0, ge=0, le=86400)
    """A transfer is creditable only if its block's timestamp is at or after the deposit address's
    assignment minus this slack; earlier value is `before_assignment` for the scanner, the
    webhooks and recon alike (docs/chain.md)."""
    chain_breaker_failures: int = Field(default=3, ge=1)
    """Consecutive unavailable RPC calls that open a chain's circuit breaker."""
    chain_breaker_open_s: float = Field(default=30.0, gt=0)
    """How long an open breaker refuses calls before one half-open probe."""
    chain_cache_final_ttl_s: int = Field(default=7 * 24 * 3600, ge=1)
    """Redis cache lifetime of answers about final blocks (hashes, receipts, transactions)."""
    chain_cache_recent_ttl_s: float = Field(default=2.0, gt=0)
    """Redis cache lifetime of everything else (head, finalized height, non-final blocks, missing
    receipts)."""
    chain_deposits_interval_s: float = Field(default=3.0, gt=0)
    """Interval of the scheduler job `chain_deposits` (verify, credit when final, orphan)."""
    chain_deposits_batch: int = Field(default=200, ge=1, le=10000)
    """Reports and deposits handled per chain per run."""
    chain_recheck_s: float = Field(default=3.0, gt=0)
    """First wait before a not-yet-final deposit or a report without a receipt is checked again
    (doubling, at most 300 s)."""
    chain_report_grace_s: float = Field(default=900.0, ge=0)
    """How long a report whose transaction the node does not know waits (not mined yet?) before it
    is refuted."""
    chain_orphan_recheck_s: float = Field(default=3600.0, ge=0)
    """How long an orphaned deposit is watched for re-inclusion."""
    chain_reorg_watch_blocks: int = Field(default=64, ge=0)
    """On `confirmations:N` chains: how many blocks below head credited deposits are watched for a
    deeper reorg (reversal `reorg:<transfer id>`)."""
    recon_chain_interval_s: float = Field(default=86400.0, gt=0)
    """Interval of the job `recon_chain` (chain reconciliation)."""
    recon_chain_window_blocks: int = Field(default=7200, ge=1)
    """Final blocks the scheduled chain reconciliation re-reads (about a day on Ethereum)."""
    recon_chain_block_span: int = Field(default=1000, ge=1, le=100000)
    """Blocks per `eth_getLogs` request of the chain reconciliation."""
    recon_chain_address_batch: int = Field(default=100, ge=1, le=1000)
    """Deposit addresses per `eth_getLogs` request (topic2)."""

    # --- metrics (docs/operations.md#metrics)
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

    # --- chain scanner and derived deposit addresses (docs/chain.md)
    eth_deposit_xpub: str | None = None
    """Account-level extended PUBLIC key of m/44'/60'/a' (depth 3, `xpub…` or `tpub…`); `POST
    /api/v1/accounts/{id}/deposit-addresses` without an address derives m/44'/60'/a'/0/i from it
    (the index kept in PostgreSQL). Unset: that request answers 503 `derivation-unavailable`. A
    key at another depth, a private key (`xprv`) or other version bytes stop every role at start
    with one line (docs/chain.md, "Derived deposit addresses")."""
    eth_scanner_lag_blocks: int = Field(default=3, ge=0, le=10000)
    """The scanner reads up to head minus this many blocks, so a lagging RPC replica cannot hide
    logs (docs/chain.md, "Scanner")."""
    eth_scanner_poll_interval_s: float = Field(default=2.0, gt=0)
    """How often a caught-up scanner asks for a new head (and retries after a node or database
    outage)."""
    eth_scanner_batch_blocks: int = Field(default=50, ge=1, le=2000)
    """Blocks per scanner step: one batched `eth_getBlockByNumber`, the `eth_getLogs` calls and one
    receipt batch per step."""
    eth_scanner_address_batch: int = Field(default=500, ge=1, le=10000)
    """Deposit addresses per `eth_getLogs` topic filter."""
    # First cursor when the chain has none (unset: head - lag; older blocks are recon's).
    eth_scanner_start_block: int | None = Field(default=None, ge=0)
    """The first block of a chain with no scanner cursor yet (unset: head minus lag; older blocks
    are `payflow recon --chain`'s)."""
    eth_scanner_keep_blocks: int = Field(default=256, ge=8, le=100000)
    """Walked block hashes kept in `chain_scanner_blocks` to find a reorg's fork point."""
    eth_scanner_writers: int = Field(default=4, ge=1, le=32)  # connections observing at once
    """Connections a scanner step observes its transfers on at once."""
    eth_scanner_max_lag_blocks: int = Field(default=200, ge=1)
    """Head lag (blocks between the node's head and the scanner's cursor) above which the scanner
    fires `chain.scanner_lag:<chain>` and `payflow status` reports a problem."""

    # --- api
    redis_key_prefix: str = "payflow:"
    """Prefix of every Redis key payflow writes (rate-limit counters; the gateway emulator's charges
    under `<prefix>gateway:charge:`; the DLQ fallback under `<prefix>dlq:fallback`,
    `<prefix>dlq:fallback:processing` and `<prefix>dlq:malformed`)."""
    api_auth_cache_seconds: float = Field(default=30.0, ge=0)
    """How long a process caches a resolved API key (0 disables); a deleted key keeps working that
    long."""
    api_ready_timeout_seconds: float = Field(default=2.0, gt=0)
    """Timeout of each `/ready` check."""
    default_chain: str = Field(default="ETH_MAINNET", pattern=r"^[A-Z0-9_]{2,40}$")
    """Chain of generic provider events that do not name one."""

    # --- payouts (docs/payouts.md): holds, hot wallet, signing, fee bumps
    # The chain the hot wallet pays on: a `chains` row with an RPC in ETH_RPC_URL/EVM_CHAINS.
    payout_chain: str = "ETH_MAINNET"
    """The chain on-chain payouts are made on (a `chains` row whose RPC is configured by
    `ETH_RPC_URL`/`EVM_CHAINS`; its finality policy decides when a payout posts)
    (docs/payouts.md)."""
    eth_hot_wallet_key: SecretStr | None = None  # hex private key, local runs only
    """The hot wallet's private key (hex), for local runs; never logged, stored or echoed."""
    eth_hot_wallet_keystore: str | None = None  # an encrypted keystore (JSON) file
    """An encrypted JSON keystore of the hot wallet (preferred over
    `ETH_HOT_WALLET_KEY` when set)."""
    eth_hot_wallet_keystore_password: SecretStr | None = None
    """The keystore's password."""
    payout_max_fee_per_gas_wei: int = Field(default=100_000_000_000, gt=0)  # the held ceiling
    """The max fee per gas a payout may ever pay (fee bumps stop there); the fee hold is gas limit *
    this."""
    payout_priority_fee_wei: int = Field(default=1_000_000_000, ge=0)
    """The first attempt's priority fee (max fee = min(ceiling, 2 * base fee + priority))."""
    payout_native_gas_limit: int = Field(default=21_000, ge=21_000)
    """Gas limit of a native (ETH) payout."""
    payout_token_gas_limit: int = Field(default=100_000, ge=21_000)
    """Gas limit of an ERC-20 `transfer` payout."""
    payout_token_fee: Decimal = Field(default=Decimal(0), ge=0)  # per token payout, its units
    """The `withdrawal_fee` of a token payout, in the token's units (its gas is paid in ETH by the
    hot wallet)."""
    payout_stuck_after_s: float = Field(default=120.0, ge=0)
    """A sent payout transaction without a receipt this long is replaced (same nonce,
    higher fee)."""
    payout_fee_bump_percent: int = Field(default=25, ge=10, le=500)
    """Fee increase per replacement (>= 10, what nodes require)."""
    payout_interval_s: float = Field(default=5.0, gt=0)
    """How often the scheduler job `payouts` signs, sends, tracks and settles."""
    payout_batch_size: int = Field(default=100, ge=1, le=10000)
    """Payouts handled per job run and state."""

    # --- alerts (payflow/ops/alerting): cooldown per key, bounded memory, delivery
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

    # --- console
    console_enabled: bool = True
    """Serve the web console under `/console` from the API role (docs/console.md)."""
    # Signs the session cookie; empty: derived from PROVIDER_WEBHOOK_SECRET (same on every replica).
    console_secret: SecretStr | None = Field(default=None, min_length=32)
    """Key (32+ characters) that signs the console's session cookie; unset: derived from
    `PROVIDER_WEBHOOK_SECRET` (the same on every replica)."""
    console_session_ttl_s: float = Field(default=8 * 3600.0, ge=60, le=30 * 86400)
    """Lifetime of a console session (8 h by default): the cookie's Max-Age and the server-side
    `expires_at`."""
    # auto: Secure when the request came over HTTPS (or X-Forwarded-Proto: https).
    console_cookie_secure: Literal["auto", "always", "never"] = "auto"
    """`Secure` flag of console cookies: `auto` behind HTTPS (https scheme or `X-Forwarded-Proto:
    https`), `always` or `never`."""
    console_signin_max_failures: int = Field(default=5, ge=1, le=1000)
    """Failed console sign-ins allowed per client address per CONSOLE_SIGNIN_WINDOW_S (counted in
    Redis); beyond, sign-in answers 429."""
    console_signin_window_s: int = Field(default=300, ge=10, le=86400)
    """Window in which CONSOLE_SIGNIN_MAX_FAILURES failed console sign-ins are counted."""
    console_page_size: int = Field(default=50, ge=5, le=500)
    """Rows per page in the console's lists."""

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

    @field_validator("eth_deposit_xpub")
    @classmethod
    def _deposit_xpub_account_level(cls, value: str | None) -> str | None:
        """The account-level extended PUBLIC key (depth 3, m/44'/60'/a'), checked whole
        at start-up (`payflow.chain.watch.derivation.account_key`): a key of another level
        would derive addresses the owner's wallet never scans. The one-line reason never
        echoes the key. Whitespace around it (a pasted line end, a space) is not part of
        the key: it is dropped, so the setting holds the key alone."""
        if value is None:
            return None
        from payflow.chain.watch.derivation import account_key

        value = value.strip()
        account_key(value)  # XpubInvalid is a ValueError: pydantic reports its message
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
