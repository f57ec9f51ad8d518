"""`payflow bench e2e --endpoints N`: N webhook endpoints of the bench merchant, registered
through the public API before the load, each wanting every event and pointing at the
bench's sink on a path of its own (`/endpoint/<n>`, apart from the payments' `/hook`).

After the load the run waits until no endpoint delivery is pending in
`webhook_deliveries`, then checks what the sink saw: on every endpoint's path, each of the
merchant's `payment.*` events under its own `webhook-id`, exactly once counted by distinct
`webhook-id`, and no delivery dead.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg
import httpx

from payflow_lab.bench.sink import WebhookSink

EVERY_EVENT = ["*"]


@dataclass(frozen=True, slots=True)
class EndpointTarget:
    """One registered endpoint and the sink path its deliveries arrive on."""

    endpoint_id: uuid.UUID
    path: str


@dataclass(frozen=True, slots=True)
class EndpointResult:
    """What the endpoints got: deliveries delivered and dead (rows), requests the sink
    received on the endpoints' paths and how many distinct (endpoint, webhook-id) among
    them, the merchant's payment events, the full-speed phase's deliveries/s, and the
    verdict (`once`: every payment event on every endpoint, nothing missing, nothing
    dead)."""

    endpoints: int
    payment_events: int
    delivered: int
    dead: int
    received: int
    distinct: int
    full_per_s: float
    once: bool


async def register_endpoints(
    api_url: str, api_key: str, sink: WebhookSink, count: int
) -> list[EndpointTarget]:
    """`POST /api/v1/webhook-endpoints` `count` times with the merchant's key, each to its
    own sink path, wanting every event."""
    targets: list[EndpointTarget] = []
    async with httpx.AsyncClient(base_url=api_url, headers={"X-API-Key": api_key}) as api:
        for n in range(count):
            path = f"/endpoint/{n}"
            answer = await api.post(
                "/api/v1/webhook-endpoints",
                json={"url": sink.url_at(path), "enabled_events": EVERY_EVENT},
            )
            if answer.status_code != 201:
                raise RuntimeError(f"registering endpoint {n}: {answer.status_code} {answer.text}")
            targets.append(EndpointTarget(uuid.UUID(answer.json()["id"]), path))
    return targets


async def wait_endpoint_deliveries(
    pool: asyncpg.Pool, merchant_id: uuid.UUID, limit_s: float, alive: Callable[[], bool]
) -> None:
    """Poll `webhook_deliveries` until none of the merchant's is pending; `alive` (a
    callable answering whether the service still runs) is checked on each poll."""
    deadline = time.monotonic() + limit_s
    while await pool.fetchval(
        "SELECT count(*) FROM webhook_deliveries WHERE merchant_id = $1 AND state = 'pending'",
        merchant_id,
    ):
        if not alive():
            raise RuntimeError("a service process died; see its log")
        if time.monotonic() > deadline:
            raise TimeoutError(f"endpoint deliveries still pending after {limit_s}s")
        await asyncio.sleep(0.2)


async def _full_phase_rate(pool: asyncpg.Pool, merchant_id: uuid.UUID) -> float:
    """Deliveries/s of the full-speed phase's payments' events: from the first of its
    payments created to the last of their deliveries delivered."""
    row = await pool.fetchrow(
        """
        SELECT count(*) AS n,
               extract(epoch FROM max(d.delivered_at) - min(p.created_at)) AS span
        FROM webhook_deliveries d
        JOIN merchant_events e ON e.id = d.event_id
        JOIN payments p ON p.id::text = e.data->>'payment_id'
        WHERE d.merchant_id = $1 AND d.state = 'delivered'
          AND p.merchant_id = $1 AND p.idempotency_key LIKE 'full-%'
        """,
        merchant_id,
    )
    if row is None or not row["n"] or row["span"] is None:
        return 0.0
    return float(row["n"]) / max(float(row["span"]), 1e-6)


async def endpoint_verdict(
    pool: asyncpg.Pool, merchant_id: uuid.UUID, sink: WebhookSink, targets: list[EndpointTarget]
) -> EndpointResult:
    """Compare what the sink received on each endpoint's path with the merchant's
    `payment.*` events and the delivery rows."""
    events = {
        row["id"]
        for row in await pool.fetch(
            "SELECT id FROM merchant_events WHERE merchant_id = $1 AND type LIKE 'payment.%'",
            merchant_id,
        )
    }
    states = {
        row["state"]: int(row["n"])
        for row in await pool.fetch(
            "SELECT state, count(*) AS n FROM webhook_deliveries WHERE merchant_id = $1"
            " GROUP BY state",
            merchant_id,
        )
    }
    received = distinct = 0
    every_event_once = True
    for target in targets:
        requests = sink.at(target.path)
        ids = {r.headers.get("webhook-id") for r in requests}
        received += len(requests)
        distinct += len(ids)
        # The endpoints want every type: each payment event must be among the ids.
        every_event_once = every_event_once and events <= ids
    dead = states.get("dead", 0)
    delivered = states.get("delivered", 0)
    once = every_event_once and dead == 0 and states.get("pending", 0) == 0
    return EndpointResult(
        endpoints=len(targets),
        payment_events=len(events),
        delivered=delivered,
        dead=dead,
        received=received,
        distinct=distinct,
        full_per_s=await _full_phase_rate(pool, merchant_id),
        once=once,
    )
