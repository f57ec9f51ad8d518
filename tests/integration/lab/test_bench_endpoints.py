"""`payflow bench e2e --endpoints`'s verdict on real PostgreSQL and RabbitMQ: payment events
sent by the worker to endpoints on the bench's sink (each on its own path, apart from the
payments' `/hook`) pass; a payment event one endpoint did not see fails it."""

from __future__ import annotations

import asyncpg

from payflow.webhooks import EventKind
from payflow_lab.bench.e2e_endpoints import (
    EndpointTarget,
    endpoint_verdict,
    wait_endpoint_deliveries,
)
from payflow_lab.bench.sink import WebhookSink
from tests.integration.webhooks.endpoint_receiver import Start, _endpoint, _event, _merchant


async def test_the_verdict_counts_each_payment_event_once_per_endpoint_path(
    pool: asyncpg.Pool, start_roles: Start, sink: WebhookSink
) -> None:
    merchant, _ = await _merchant(pool, "bench")
    targets = []
    for n in range(2):
        path = f"/endpoint/{n}"
        endpoint_id, _ = await _endpoint(pool, merchant, sink.url_at(path), ["*"])
        targets.append(EndpointTarget(endpoint_id, path))
    await start_roles(("relay", "worker"), worker_queues=("endpoints",))
    paid = await _event(pool, merchant, EventKind.PAYMENT_SUCCEEDED)
    failed = await _event(pool, merchant, EventKind.PAYMENT_FAILED)
    await _event(pool, merchant, EventKind.PAYOUT_HELD)  # not a payment event: not counted
    await wait_endpoint_deliveries(pool, merchant, 30.0, lambda: True)

    result = await endpoint_verdict(pool, merchant, sink, targets)
    assert result.once
    assert (result.endpoints, result.payment_events, result.dead) == (2, 2, 0)
    assert result.delivered == result.received == result.distinct == 6
    assert sink.at("/hook") == []
    assert {r.headers["webhook-id"] for r in sink.at("/endpoint/1")} >= {paid, failed}

    # One endpoint missing one payment event: the verdict fails.
    sink.received = [
        r
        for r in sink.received
        if not (r.path == "/endpoint/1" and r.headers["webhook-id"] == failed)
    ]
    assert not (await endpoint_verdict(pool, merchant, sink, targets)).once
