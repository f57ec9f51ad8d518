"""Retention of the merchants' event stream: events are kept EVENT_RETENTION_DAYS, then
deleted by the scheduler's `cleanup_merchant_events`, oldest first in bounded batches; the
service records only through `merchant_event_record` and deletes only through the job."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from payflow.api.auth import create_merchant
from payflow.config import Settings, load_settings
from payflow.config.base import SettingsError
from payflow.jobs.spec import JobContext, Outcome
from payflow.ops.scheduler import run_job
from payflow.webhooks import EventKind, record_event
from tests.integration.ops.conftest import RecordingSink


async def _events(pool: asyncpg.Pool, owner_pool: asyncpg.Pool, ages_days: list[int]) -> list[str]:
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, f"m-{uuid.uuid4().hex[:6]}", admin=False)
        ids = []
        for n, _age in enumerate(ages_days):
            event_id = await record_event(
                conn, merchant, EventKind.PAYOUT_HELD, f"p-{n}", {"payout_id": f"p-{n}"}
            )
            assert event_id is not None
            ids.append(event_id)
    for event_id, age in zip(ids, ages_days, strict=True):
        await owner_pool.execute(
            "UPDATE merchant_events SET created_at = now() - make_interval(days => $2)"
            " WHERE id = $1",
            event_id,
            age,
        )
    return ids


async def _left(owner_pool: asyncpg.Pool) -> set[str]:
    return {row[0] for row in await owner_pool.fetch("SELECT id FROM merchant_events")}


async def test_events_older_than_the_retention_go_oldest_first(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    ids = await _events(pool, owner_pool, [40, 35, 31, 29, 0])
    assert settings.retention.event_retention_days == 30  # the default
    small = settings.model_copy(update={"event_cleanup_batch": 1, "event_cleanup_max_batches": 2})
    run = await run_job(JobContext(pool, small, RecordingSink()), "cleanup_merchant_events")
    assert run is not None and run.result.summary == "deleted=2 batches=2"
    assert await _left(owner_pool) == set(ids[2:])  # the two oldest went first
    run = await run_job(JobContext(pool, settings, RecordingSink()), "cleanup_merchant_events")
    assert run is not None and run.result.outcome is not Outcome.SKIPPED
    assert await _left(owner_pool) == set(ids[3:])  # 29 days and today stay
    shorter = settings.model_copy(update={"event_retention_days": 1})
    await run_job(JobContext(pool, shorter, RecordingSink()), "cleanup_merchant_events")
    assert await _left(owner_pool) == {ids[4]}


def test_the_retention_is_a_setting_of_at_least_one_day() -> None:
    assert load_settings(event_retention_days="45").retention.event_retention_days == 45
    with pytest.raises(SettingsError, match="EVENT_RETENTION_DAYS"):
        load_settings(event_retention_days="0")


async def test_the_service_records_only_through_the_function_and_never_deletes(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool
) -> None:
    [event_id] = await _events(pool, owner_pool, [0])
    merchant = await pool.fetchval(
        "SELECT merchant_id FROM merchant_events WHERE id = $1", event_id
    )
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await pool.execute(
            "INSERT INTO merchant_events (id, merchant_id, type, subject_id, data)"
            " VALUES ($1, $2, 'payout.held', 'direct', '{}')",
            "evt_" + uuid.uuid4().hex,
            merchant,
        )
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await pool.execute("DELETE FROM merchant_events")
    # the same cause again records nothing
    again = await pool.fetchval(
        "SELECT merchant_event_record($1, 'payout.held', 'p-0', '{}'::jsonb)", merchant
    )
    assert again is None
    # data must be an object: a JSON string is refused by the table's CHECK
    with pytest.raises(asyncpg.CheckViolationError):
        await pool.fetchval(
            "SELECT merchant_event_record($1, 'payout.held', 'p-9', to_jsonb('x'::text))",
            merchant,
        )
