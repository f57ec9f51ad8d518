"""Prometheus metric families of every role (issue 9), named by Prometheus conventions.

One place defines them so that every module increments the same families; each role
serves them (the API on `/metrics`, the other roles on `METRICS_PORT`). The families
register on `REGISTRY`, a registry owned by this module (not prometheus-client's global
default), which the serving code exposes.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

REGISTRY = CollectorRegistry(auto_describe=True)

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
WEBHOOK_ATTEMPTS = Counter(
    "payflow_webhook_attempts_total",
    "Merchant webhook POST attempts by result (delivered, failed, refused)",
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
