"""Prometheus metrics for the API: request counts and latencies by route template.

With several uvicorn workers, `payflow api` sets PROMETHEUS_MULTIPROC_DIR so every
worker writes to shared files and /metrics aggregates them (prometheus multiprocess
mode); with one worker the per-app registry is served directly, followed by the
families every role shares (`payflow.metrics.REGISTRY`: consumer outcomes, postings,
webhook attempts, reconciliation, jobs and the state gauges). Under `payflow up` those
are incremented by the relay, worker and scheduler in the same process.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from payflow.metrics import REGISTRY as SHARED_REGISTRY

LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    """The API's metric families, registered on a registry owned by one app."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "payflow_http_requests_total",
            "HTTP requests by method, route template and status",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "payflow_http_request_duration_seconds",
            "HTTP request latency by method and route template",
            ("method", "route"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one finished request and record its latency."""
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def render(self) -> bytes:
        """The exposition text of the API's and the shared families; aggregated over
        workers in multiprocess mode (every family writes to the shared files there)."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            registry = CollectorRegistry()
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return generate_latest(registry)
        return generate_latest(self.registry) + generate_latest(SHARED_REGISTRY)
