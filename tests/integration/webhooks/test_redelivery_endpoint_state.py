"""A redelivery only queues what will be sent: to a disabled endpoint named explicitly it
is a 409 problem (it was a 202 that waited until the endpoint was enabled again); without
`endpoint_id` disabled endpoints are skipped and named. A delete racing a redelivery
waits for it (the endpoint row is locked FOR SHARE) and ends the endpoint's pending
deliveries dead, so none stays pending forever."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from fastapi import FastAPI

from payflow.errors import NotFound
from payflow.webhooks import EventKind
from payflow.webhooks.endpoints import Scope, delete_endpoint, redeliver
from tests.integration.webhooks.endpoint_receiver import _endpoint, _event, _merchant
from tests.integration.webhooks.test_endpoints_api import _client, app  # noqa: F401

URL = "http://127.0.0.1:9/hook"


async def _states(pool: asyncpg.Pool, event_id: str) -> dict[str, str]:
    rows = await pool.fetch(
        "SELECT endpoint_id, state FROM webhook_deliveries WHERE event_id = $1", event_id
    )
    return {str(row["endpoint_id"]): row["state"] for row in rows}


async def test_a_disabled_endpoint_is_a_409_or_skipped(
    app: FastAPI,  # noqa: F811
    pool: asyncpg.Pool,
) -> None:
    shop, key = await _merchant(pool, "shop")
    on, _ = await _endpoint(pool, shop, URL + "/on", ["*"])
    off, _ = await _endpoint(pool, shop, URL + "/off", ["*"])
    event = await _event(pool, shop, EventKind.DEPOSIT_PENDING)
    await pool.execute("UPDATE webhook_endpoints SET enabled = false WHERE id = $1", off)
    await pool.execute("UPDATE webhook_deliveries SET state = 'dead' WHERE event_id = $1", event)
    async with _client(app, key) as api:
        path = f"/api/v1/events/{event}/redeliver"
        refused = await api.post(path, json={"endpoint_id": str(off)})
        assert refused.status_code == 409, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert "disabled" in refused.json()["detail"]
        assert (await _states(pool, event))[str(off)] == "dead"
        every = await api.post(path)
        assert every.status_code == 202, every.text
        assert [r["endpoint_id"] for r in every.json()["redeliveries"]] == [str(on)]
        assert every.json()["skipped"] == [str(off)]
        assert await _states(pool, event) == {str(on): "pending", str(off): "dead"}
        await pool.execute("UPDATE webhook_endpoints SET enabled = false WHERE id = $1", on)
        nothing = await api.post(path)
        assert nothing.status_code == 422, nothing.text


async def test_a_delete_racing_a_redelivery_leaves_nothing_pending(pool: asyncpg.Pool) -> None:
    shop, _ = await _merchant(pool, "shop")
    endpoint, _ = await _endpoint(pool, shop, URL, ["*"])
    event = await _event(pool, shop, EventKind.DEPOSIT_PENDING)
    await pool.execute("UPDATE webhook_deliveries SET state = 'dead' WHERE event_id = $1", event)
    scope = Scope(shop)
    async with pool.acquire() as redelivering, pool.acquire() as deleting:
        tx = redelivering.transaction()
        await tx.start()
        done = await redeliver(redelivering, scope, event, "test", endpoint)
        assert [d["endpoint_id"] for d in done.queued] == [endpoint]
        delete = asyncio.create_task(_delete(deleting, scope, endpoint))
        await asyncio.sleep(0.5)
        assert not delete.done(), "the delete must wait for the redelivery's lock"
        await tx.commit()
        assert await asyncio.wait_for(delete, 10) == 1
    assert await _states(pool, event) == {str(endpoint): "dead"}
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND state = 'pending'",
            endpoint,
        )
        == 0
    )
    async with pool.acquire() as conn, conn.transaction():
        with pytest.raises(NotFound):
            await redeliver(conn, scope, event, "test", endpoint)


async def _delete(conn: asyncpg.Connection, scope: Scope, endpoint: object) -> int:
    async with conn.transaction():
        return await delete_endpoint(conn, scope, endpoint)  # type: ignore[arg-type]
