"""After its `api_idempotency` record is gone, a retried request is judged
against the domain row it made (the `wd:` event or the payment), and the retention job
that removes those records."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import httpx

from payflow.config import Settings
from payflow.ledger.posting import post_event
from payflow.ledger.withdrawals import withdrawal_event_id
from payflow.ops.retention import cleanup_idempotency_keys

PAYMENT: dict[str, Any] = {
    "amount": "10.00",
    "currency": "RUB",
    "description": "order 7",
    "metadata": {"order": 7, "rate": 1.5, "tags": ["a", {"b": None}]},
    "webhook_url": "http://127.0.0.1:9/hook",
}


async def _account(client: httpx.AsyncClient, asset: str = "USD") -> str:
    response = await client.post("/api/v1/accounts", json={"asset": asset})
    assert response.status_code == 201, response.text
    account_id: str = response.json()["account_id"]
    return account_id


async def _expire_keys(owner_pool: asyncpg.Pool, app: Any) -> None:
    """Backdate every idempotency record past the retention and run the retention job."""
    async with owner_pool.acquire() as conn:
        await conn.execute("UPDATE api_idempotency SET created_at = now() - interval '25 hours'")
    report = await cleanup_idempotency_keys(app.state.api.pool, app.state.api.settings)
    assert report.deleted >= 1
    assert await _fetchval(app, "SELECT count(*) FROM api_idempotency") == 0


async def _fetchval(app: Any, sql: str, *args: Any) -> Any:
    async with app.state.api.pool.acquire() as conn:
        return await conn.fetchval(sql, *args)


async def _merchant_id(app: Any, name: str = "bootstrap") -> uuid.UUID:
    merchant_id: uuid.UUID = await _fetchval(app, "SELECT id FROM merchants WHERE name = $1", name)
    return merchant_id


async def test_withdrawal_replayed_after_retention_is_judged_by_its_event(
    app: Any, client: httpx.AsyncClient, owner_pool: asyncpg.Pool
) -> None:
    a1, a2 = await _account(client), await _account(client)
    headers = {"Idempotency-Key": "K-" + uuid.uuid4().hex}
    first = await client.post(
        f"/api/v1/accounts/{a1}/withdrawals", json={"amount": "1.00"}, headers=headers
    )
    assert first.status_code == 202, first.text
    event_id = first.json()["event_id"]
    assert first.json() == {
        "event_id": event_id,
        "account_id": a1,
        "amount": "1.00",
        "status": "pending",
    }
    await _expire_keys(owner_pool, app)

    other = await client.post(
        f"/api/v1/accounts/{a2}/withdrawals", json={"amount": "50.00"}, headers=headers
    )
    assert other.status_code == 409, other.text
    assert other.json()["type"].endswith("idempotency-key-reused")
    assert "50" not in other.json()["detail"] and a2 not in other.json()["detail"]
    more = await client.post(
        f"/api/v1/accounts/{a1}/withdrawals", json={"amount": "2.00"}, headers=headers
    )
    assert more.status_code == 409

    same = await client.post(
        f"/api/v1/accounts/{a1}/withdrawals", json={"amount": "1.00"}, headers=headers
    )
    assert same.status_code == 202
    assert same.json() == first.json()
    # The amount is compared at the asset's scale: "1" is the same withdrawal.
    plain = await client.post(
        f"/api/v1/accounts/{a1}/withdrawals", json={"amount": "1"}, headers=headers
    )
    assert (plain.status_code, plain.json()) == (202, first.json())

    assert await _fetchval(app, "SELECT count(*) FROM payment_events") == 1
    assert await _fetchval(app, "SELECT count(*) FROM outbox") == 1
    assert await _fetchval(app, "SELECT count(*) FROM api_idempotency") == 0
    # The replay reports the event's current status, not the request's.
    async with owner_pool.acquire() as conn:
        await conn.execute(
            "UPDATE accounts SET balance = 5, initial_balance = 5 WHERE id = $1", uuid.UUID(a1)
        )
    await post_event(app.state.api.pool, app.state.api.settings, event_id)
    posted = await client.post(
        f"/api/v1/accounts/{a1}/withdrawals", json={"amount": "1.00"}, headers=headers
    )
    assert posted.json() == {**first.json(), "status": "confirmed"}
    account = (await client.get(f"/api/v1/accounts/{a1}")).json()
    assert account["balance"] == "4.00"


async def test_payment_replayed_after_retention_is_judged_by_the_payment(
    app: Any, client: httpx.AsyncClient, owner_pool: asyncpg.Pool
) -> None:
    headers = {"Idempotency-Key": "K-" + uuid.uuid4().hex}
    first = await client.post("/api/v1/payments", json=PAYMENT, headers=headers)
    assert first.status_code == 202, first.text
    await _expire_keys(owner_pool, app)

    same = await client.post("/api/v1/payments", json=PAYMENT, headers=headers)
    assert same.status_code == 202, same.text
    assert same.json() == first.json()
    merchant_id = str(await _merchant_id(app))
    for change in (
        {"amount": "10.01"},
        {"currency": "USD"},
        {"description": "order 8"},
        {"description": None},
        {"metadata": {**PAYMENT["metadata"], "order": 8}},
        {"metadata": {**PAYMENT["metadata"], "order": 7.0}},
        {"metadata": {}},
        {"webhook_url": "http://127.0.0.1:9/other"},
    ):
        changed = await client.post("/api/v1/payments", json={**PAYMENT, **change}, headers=headers)
        assert changed.status_code == 409, (change, changed.text)
        problem = changed.json()
        assert problem["type"].endswith("idempotency-key-reused"), problem
        assert merchant_id not in changed.text
        assert "duplicate" not in changed.text and "constraint" not in changed.text

    assert await _fetchval(app, "SELECT count(*) FROM payments") == 1
    assert await _fetchval(app, "SELECT count(*) FROM outbox") == 1
    assert await _fetchval(app, "SELECT count(*) FROM api_idempotency") == 0
    # Once processed, the replay shows the payment's current status.
    async with owner_pool.acquire() as conn:
        await conn.execute("UPDATE payments SET status = 'succeeded', processed_at = now()")
    later = await client.post("/api/v1/payments", json=PAYMENT, headers=headers)
    assert later.json() == {**first.json(), "status": "succeeded"}


async def test_a_derived_event_id_that_is_taken_stops_the_withdrawal(
    app: Any, client: httpx.AsyncClient, owner_pool: asyncpg.Pool
) -> None:
    """Item 2, `wd:`: a row with the derived id that was not made by this request is an
    error that rolls the request back: no outbox row, no idempotency record, no echo."""
    account_id = await _account(client)
    key = "K-" + uuid.uuid4().hex
    event_id = withdrawal_event_id(await _merchant_id(app), key)
    url = f"/api/v1/accounts/{account_id}/withdrawals"
    squat = (
        "INSERT INTO payment_events (event_id, account_id, amount, event_type) "
        "VALUES ($1, $2, 1, 'deposit')"
    )
    async with owner_pool.acquire() as conn:
        transaction = conn.transaction()
        await transaction.start()
        await conn.execute(squat, event_id, uuid.UUID(account_id))
        # The request's read cannot see the uncommitted row; its insert waits on it.
        request = asyncio.create_task(
            client.post(url, json={"amount": "1.00"}, headers={"Idempotency-Key": key})
        )
        for _ in range(200):
            waiting = await owner_pool.fetchval(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            if waiting:
                break
            await asyncio.sleep(0.02)
        assert waiting, "the withdrawal never reached its insert"
        await transaction.commit()
    response = await request
    assert response.status_code == 409, response.text
    assert "1.00" not in response.text and account_id not in response.text
    assert await _fetchval(app, "SELECT count(*) FROM outbox") == 0
    assert await _fetchval(app, "SELECT count(*) FROM api_idempotency") == 0
    assert await _fetchval(app, "SELECT event_type FROM payment_events") == "deposit"
    # Committed, the same row is seen first and refused as another request's.
    again = await client.post(url, json={"amount": "1.00"}, headers={"Idempotency-Key": key})
    assert again.status_code == 409
    assert await _fetchval(app, "SELECT count(*) FROM outbox") == 0


async def test_retention_deletes_only_records_past_the_retention(
    app: Any, client: httpx.AsyncClient, owner_pool: asyncpg.Pool
) -> None:
    for _ in range(5):
        headers = {"Idempotency-Key": "K-" + uuid.uuid4().hex}
        response = await client.post("/api/v1/payments", json=PAYMENT, headers=headers)
        assert response.status_code == 202
    async with owner_pool.acquire() as conn:
        keys = [row["key"] for row in await conn.fetch("SELECT key FROM api_idempotency")]
        old, young = keys[:3], keys[3:]
        await conn.execute(
            "UPDATE api_idempotency SET created_at = now() - interval '24 hours 1 minute' "
            "WHERE key = ANY($1)",
            old,
        )
        await conn.execute(
            "UPDATE api_idempotency SET created_at = now() - interval '23 hours 59 minutes' "
            "WHERE key = ANY($1)",
            young,
        )
    settings: Settings = app.state.api.settings
    assert settings.idempotency_retention_hours == 24
    report = await cleanup_idempotency_keys(app.state.api.pool, settings, batch_size=2)
    assert (report.deleted, report.skipped) == (3, False)
    left = await _fetchval(app, "SELECT array_agg(key ORDER BY key) FROM api_idempotency")
    assert left == sorted(young)
    assert await _fetchval(app, "SELECT count(*) FROM payments") == 5
    again = await cleanup_idempotency_keys(app.state.api.pool, settings)
    assert again.deleted == 0


async def test_retention_skips_while_another_replica_runs_it(
    app: Any, client: httpx.AsyncClient, owner_pool: asyncpg.Pool
) -> None:
    from payflow.jobs.lock import job_lock
    from payflow.ops.retention import JOB_NAME

    response = await client.post(
        "/api/v1/payments", json=PAYMENT, headers={"Idempotency-Key": uuid.uuid4().hex}
    )
    assert response.status_code == 202
    async with owner_pool.acquire() as conn:
        await conn.execute("UPDATE api_idempotency SET created_at = now() - interval '2 days'")
        async with conn.transaction():
            assert await job_lock(conn, JOB_NAME)
            busy = await cleanup_idempotency_keys(app.state.api.pool, app.state.api.settings)
    assert (busy.deleted, busy.skipped) == (0, True)
    assert await _fetchval(app, "SELECT count(*) FROM api_idempotency") == 1
    done = await cleanup_idempotency_keys(app.state.api.pool, app.state.api.settings)
    assert (done.deleted, done.skipped) == (1, False)


def test_the_scheduler_runs_the_retention_job() -> None:
    from payflow.ops.retention import cleanup_idempotency_keys_job
    from payflow.ops.scheduler import JOBS

    assert JOBS["cleanup_idempotency_keys"].run is cleanup_idempotency_keys_job
