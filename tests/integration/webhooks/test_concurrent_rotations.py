"""Concurrent rotations of one endpoint run one after another (the row is locked FOR
UPDATE in the rotation's transaction): each answer's secret was the endpoint's secret
when it committed, the rotation after it kept it as the previous one, and deliveries
afterwards are signed with the secret answered last and the one before it (during the
overlap), never with a secret no answer gave."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx
from fastapi import FastAPI

from payflow.webhooks import EventKind
from tests.integration.support import wait_until
from tests.integration.webhooks.endpoint_receiver import (
    Receiver,
    Start,
    _delivered,
    _endpoint,
    _event,
    _merchant,
)
from tests.integration.webhooks.test_endpoints_api import _client, app  # noqa: F401

ROTATIONS = 6


async def test_the_secret_answered_last_signs_after_concurrent_rotations(
    app: FastAPI,  # noqa: F811
    pool: asyncpg.Pool,
    start_roles: Start,
    receiver: Receiver,
) -> None:
    shop, key = await _merchant(pool, "shop")
    endpoint, first = await _endpoint(pool, shop, receiver.url("rot"), ["*"])
    finished: list[str] = []

    async def rotate(api: httpx.AsyncClient) -> None:
        answer = await api.post(f"/api/v1/webhook-endpoints/{endpoint}/rotate-secret")
        assert answer.status_code == 200, answer.text
        finished.append(answer.json()["secret"])

    async with _client(app, key) as api:
        await asyncio.gather(*(rotate(api) for _ in range(ROTATIONS)))
    assert len(set(finished)) == ROTATIONS and first not in finished
    row = await pool.fetchrow(
        "SELECT secret, previous_secret FROM webhook_endpoints WHERE id = $1", endpoint
    )
    # Serialised: the stored secret is the one answered last, the previous one the answer
    # before it (each rotation saw the one before it committed).
    assert row["secret"] == finished[-1]
    assert row["previous_secret"] == finished[-2]
    await start_roles(("relay", "worker"), worker_queues=("endpoints",))
    event = await _event(pool, shop, EventKind.PAYOUT_SENT)
    await wait_until(lambda: _delivered(pool, event), what="the delivery after the rotations")
    (delivery,) = receiver.at("rot")
    assert delivery.verifies_with(finished[-1])
    assert delivery.verifies_with(finished[-2])
    assert len(delivery.headers["webhook-signature"].split(" ")) == 2
    assert not any(delivery.verifies_with(old) for old in [first, *finished[:-2]])
