"""Prometheus metric families of every role, named by Prometheus conventions.

One place defines them so that every module increments the same families; each role
serves them (the API on `/metrics`, the other roles on `METRICS_PORT`, see
`payflow.metrics_server`). The families register on `REGISTRY`, a registry owned by this
module (not prometheus-client's global default), which the serving code exposes.

Counters are incremented where the event happens, after its transaction committed.
The state gauges (events and payments by status, DLQ, outbox lag, zombies, queue depth)
are read from PostgreSQL and RabbitMQ by `payflow.gauges.StateRefresher` in the
background (above the domains, since it reads their tables), with a short timeout per
source, so a scrape only reads cached numbers and never waits on a database or broker.
Names and label values are documented in docs/operations.md#metrics.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

REGISTRY = CollectorRegistry(auto_describe=True)

# Label values that always exist (zero when no row has them), so alerts and dashboards
# see a series from the first scrape on.
EVENT_STATUSES = ("pending", "enqueued", "processing", "confirmed", "failed")
PAYMENT_STATUSES = ("pending", "succeeded", "failed")
# The zombie bounds of the seed (docs/operations.md#zombies), in seconds.
ZOMBIE_PROCESSING_S = 300.0
ZOMBIE_WAITING_S = 900.0
STUCK_CLAIM_S = 600.0

CONSUMER_MESSAGES = Counter(
    "payflow_consumer_messages_total",
    "Messages settled by consumers, by queue and outcome (acked, retried, dead_lettered, terminal)",
    ("queue", "outcome"),
    registry=REGISTRY,
)
POSTINGS = Counter(
    "payflow_postings_total",
    "Ledger postings by outcome (success, insufficient_funds, account_frozen, amount_overflow,"
    " replayed)",
    ("outcome",),
    registry=REGISTRY,
)
PAYOUTS = Counter(
    "payflow_payouts_total",
    "On-chain payout steps by state (signed, sent, bumped, confirmed, failed, waiting)",
    ("state",),
    registry=REGISTRY,
)

WEBHOOK_ATTEMPTS = Counter(
    "payflow_webhook_attempts_total",
    "Merchant webhook POST attempts by result (delivered, failed, refused, duplicate)",
    ("result",),
    registry=REGISTRY,
)
RECON_RUNS = Counter(
    "payflow_recon_runs_total",
    "Reconciliation runs by kind (hot, full)",
    ("kind",),
    registry=REGISTRY,
)
RECON_MISMATCHES = Gauge(
    "payflow_recon_mismatches",
    "Mismatches found by the last run of each kind",
    ("kind",),
    registry=REGISTRY,
)
RECON_LAST_SUCCESS = Gauge(
    "payflow_recon_last_success_timestamp_seconds",
    "Unix time of the last clean reconciliation of each kind",
    ("kind",),
    registry=REGISTRY,
)
JOB_RUNS = Counter(
    "payflow_job_runs_total",
    "Maintenance job runs by job and outcome (ok, alert, skipped, failed)",
    ("job", "outcome"),
    registry=REGISTRY,
)

# --- state gauges, set by StateRefresher (max over live processes in multiprocess mode)
EVENTS = Gauge(
    "payflow_events",
    "Payment events by status (rows of payment_events)",
    ("status",),
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
PAYMENTS = Gauge(
    "payflow_payments",
    "Merchant payments by status",
    ("status",),
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
DLQ_UNRESOLVED = Gauge(
    "payflow_dlq_unresolved",
    "Dead-letter rows not resolved yet",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
DLQ_LAST_HOUR = Gauge(
    "payflow_dlq_created_last_hour",
    "Dead-letter rows created in the last hour (resolved or not)",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
OUTBOX_UNPUBLISHED = Gauge(
    "payflow_outbox_unpublished",
    "Outbox rows not yet published to RabbitMQ",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
OUTBOX_OLDEST_AGE = Gauge(
    "payflow_outbox_oldest_unpublished_age_seconds",
    "Age of the oldest unpublished outbox row (0 when none): the relay's lag",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
ZOMBIE_EVENTS = Gauge(
    "payflow_zombie_events",
    "Payment events stuck in a state past its bound, by state (processing > 5 min,"
    " waiting = pending or enqueued > 15 min)",
    ("state",),
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
STUCK_CLAIMS = Gauge(
    "payflow_stuck_claims",
    "processed_events claims still pending after 10 min (an invariant is broken)",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
QUEUE_MESSAGES = Gauge(
    "payflow_queue_messages",
    "RabbitMQ messages per work, retry and DLQ queue, by state (ready only: AMQP's"
    " passive declare does not report unacked messages)",
    ("queue", "state"),
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
STATE_REFRESHES = Counter(
    "payflow_state_refreshes_total",
    "Refreshes of the state gauges by source (database, broker) and outcome (ok, failed)",
    ("source", "outcome"),
    registry=REGISTRY,
)
STATE_LAST_REFRESH = Gauge(
    "payflow_state_last_refresh_timestamp_seconds",
    "Unix time of the last successful refresh of the state gauges, by source",
    ("source",),
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
