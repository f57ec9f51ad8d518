"""Admin DLQ endpoints: list, show and an audited replay that can never apply twice."""

from __future__ import annotations

from decimal import Decimal

import httpx
from fastapi import FastAPI

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.dlq.records import record_dead_letter
from payflow.ledger.accounts import create_account, record_event
from payflow.ledger.records import EventType
from payflow.ledger.states import EventStatus, transition


async def _dead_event(app: FastAPI, settings: Settings) -> int:
    """A deposit that exhausted its retries: failed, never posted, with one DLQ row."""
    pool = app.state.api.pool
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "ETH", Decimal(0))
        await record_event(
            conn,
            event_id="dep-dead",
            account_id=account.id,
            amount="1.5",
            event_type=EventType.DEPOSIT,
            scale=18,
        )
        await transition(conn, "dep-dead", EventStatus.FAILED)
        dlq_id: int = await record_dead_letter(
            conn,
            source="payment_event",
            subject_id="dep-dead",
            payload={"version": 1, "event_id": "dep-dead"},
            error="RetryableError: lock timeout",
            attempt=4,
        )
    return dlq_id


async def test_list_show_and_replay_once(
    app: FastAPI, api_settings: Settings, admin: httpx.AsyncClient
) -> None:
    dlq_id = await _dead_event(app, api_settings)

    listed = await admin.get("/api/v1/admin/dlq")
    shown = await admin.get(f"/api/v1/admin/dlq/{dlq_id}")
    replayed = await admin.post(f"/api/v1/admin/dlq/{dlq_id}/replay")
    again = await admin.post(f"/api/v1/admin/dlq/{dlq_id}/replay")

    assert listed.status_code == 200
    assert [item["id"] for item in listed.json()["items"]] == [dlq_id]
    assert shown.json()["payload"] == {"version": 1, "event_id": "dep-dead"}
    assert shown.json()["attempt"] == 4 and shown.json()["resolved_at"] is None
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["resolution"].startswith("requeued")
    assert replayed.json()["resolved_by"].startswith("api:")
    assert again.status_code == 409
    assert again.headers["content-type"].startswith("application/problem+json")

    pool = app.state.api.pool
    row = await pool.fetchrow("SELECT resolved_at, resolved_by, resolution FROM dead_letter_queue")
    assert row["resolved_at"] is not None and row["resolved_by"].startswith("api:")
    assert await pool.fetchval("SELECT status FROM payment_events") == "pending"
    sent = await pool.fetch("SELECT topic, payload FROM outbox WHERE topic = 'ledger.event'")
    assert [(r["topic"], r["payload"]["event_id"]) for r in sent] == [("ledger.event", "dep-dead")]
    resolved = await admin.get("/api/v1/admin/dlq")
    assert resolved.json()["items"] == []
    with_resolved = await admin.get("/api/v1/admin/dlq", params={"include_resolved": "true"})
    assert [item["id"] for item in with_resolved.json()["items"]] == [dlq_id]


async def test_dlq_needs_the_admin_key(
    app: FastAPI, api_settings: Settings, client: httpx.AsyncClient
) -> None:
    dlq_id = await _dead_event(app, api_settings)
    assert (await client.get("/api/v1/admin/dlq")).status_code == 403
    assert (await client.post(f"/api/v1/admin/dlq/{dlq_id}/replay")).status_code == 403
    status = await app.state.api.pool.fetchval("SELECT status FROM payment_events")
    assert status == "failed"


async def test_unknown_dead_letter_is_404(admin: httpx.AsyncClient) -> None:
    assert (await admin.get("/api/v1/admin/dlq/999")).status_code == 404
    assert (await admin.post("/api/v1/admin/dlq/999/replay")).status_code == 404
    assert (await admin.get("/api/v1/admin/dlq/0")).status_code == 422
