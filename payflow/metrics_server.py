"""The Prometheus metrics server of the non-API roles (`relay`, `worker`, `scheduler`).

prometheus-client's own HTTP server (a daemon thread) serves `payflow.metrics.REGISTRY`
on `METRICS_HOST:METRICS_PORT` at any path (`/metrics` by convention). It reads the
cached values only, so a scrape never waits on PostgreSQL or RabbitMQ. The API serves
the same families on its `/metrics` route instead (`payflow up`, `payflow api`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from wsgiref.simple_server import WSGIServer

import structlog
from prometheus_client import start_http_server

from payflow.config import ObservabilitySettings
from payflow.metrics import REGISTRY

log = structlog.get_logger("payflow.metrics")


def start_metrics_server(
    settings: ObservabilitySettings,
) -> tuple[WSGIServer, threading.Thread] | None:
    """Bind and serve on `METRICS_HOST:METRICS_PORT`; None when disabled (port 0) or
    when the port cannot be bound, which is logged in one line and never stops the role."""
    if settings.metrics_port == 0:
        return None
    try:
        server, thread = start_http_server(
            settings.metrics_port, addr=settings.metrics_host, registry=REGISTRY
        )
    except OSError as exc:
        log.error(
            "payflow.metrics.bind_failed",
            host=settings.metrics_host,
            port=settings.metrics_port,
            error=f"{type(exc).__name__}: {exc.strerror or exc}",
        )
        return None
    log.info("payflow.metrics.serving", host=settings.metrics_host, port=settings.metrics_port)
    return server, thread


@contextmanager
def serving_metrics(settings: ObservabilitySettings) -> Iterator[None]:
    """Serve metrics for the duration of the block, then stop the server thread."""
    started = start_metrics_server(settings)
    try:
        yield
    finally:
        if started is not None:
            server, thread = started
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
