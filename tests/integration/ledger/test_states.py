"""The state machine, walked pair by pair against the real compare-and-set UPDATE."""

from __future__ import annotations

import itertools

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.errors import NotFound
from payflow.ledger.records import EventType
from payflow.ledger.states import (
    TRANSITIONS,
    EventStatus,
    TransitionKind,
    existing_events,
    is_valid,
    transition,
    transition_many,
)
from tests.integration.ledger.helpers import new_account, new_event

EXPECTED_VALID = {
    ("pending", "enqueued"),
    ("pending", "failed"),
    ("enqueued", "processing"),
    ("enqueued", "failed"),
    ("enqueued", "pending"),
    ("enqueued", "confirmed"),
    ("processing", "confirmed"),
    ("processing", "failed"),
}


def test_transition_table_is_exactly_the_specified_one() -> None:
    table = {(str(s), str(t)) for s, targets in TRANSITIONS.items() for t in targets}
    assert table == EXPECTED_VALID


async def test_every_pair_of_statuses(pool: asyncpg.Pool, settings: Settings) -> None:
    account = await new_account(pool, settings)
    for source, target in itertools.product(EventStatus, EventStatus):
        event_id = f"walk-{source}-{target}"
        await new_event(pool, settings, account, event_id, "1", EventType.DEPOSIT)
        # Test setup only: place the event in `source` directly.
        await pool.execute(
            "UPDATE payment_events SET status = $2 WHERE event_id = $1", event_id, str(source)
        )
        async with pool.acquire() as conn, transaction(conn, settings):
            result = await transition(conn, event_id, target)
        stored = await pool.fetchval(
            "SELECT status FROM payment_events WHERE event_id = $1", event_id
        )
        if is_valid(source, target):
            assert result.kind is TransitionKind.CHANGED, (source, target)
            assert stored == target
        elif source is target:
            assert result.kind is TransitionKind.ALREADY_IN_TARGET, (source, target)
            assert stored == source
        elif source.is_terminal:
            assert result.kind is TransitionKind.ALREADY_TERMINAL, (source, target)
            assert stored == source
        else:
            assert result.kind is TransitionKind.INVALID, (source, target)
            assert stored == source


async def test_expected_source_detects_a_concurrent_change(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "cas", "1", EventType.DEPOSIT)
    async with pool.acquire() as conn, transaction(conn, settings):
        await transition(conn, "cas", EventStatus.ENQUEUED)
        moved_by_other = await transition(
            conn, "cas", EventStatus.FAILED, expected=EventStatus.PENDING
        )
    assert moved_by_other.kind is TransitionKind.CONCURRENT_CHANGE
    assert moved_by_other.status is EventStatus.ENQUEUED


async def test_unknown_event_raises_not_found(pool: asyncpg.Pool, settings: Settings) -> None:
    async with pool.acquire() as conn, transaction(conn, settings):
        with pytest.raises(NotFound):
            await transition(conn, "missing", EventStatus.ENQUEUED)


async def test_status_check_constraint_is_named(pool: asyncpg.Pool, settings: Settings) -> None:
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "bad", "1", EventType.DEPOSIT)
    with pytest.raises(asyncpg.CheckViolationError) as caught:
        await pool.execute("UPDATE payment_events SET status = 'lost'")
    assert caught.value.constraint_name == "payment_events_status_valid"


async def test_transition_many_moves_exactly_the_rows_the_table_allows(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    for status in EventStatus:
        await new_event(pool, settings, account, f"many-{status}", "1", EventType.DEPOSIT)
        await pool.execute(  # test setup only: place the event in `status` directly
            "UPDATE payment_events SET status = $2 WHERE event_id = $1", f"many-{status}", status
        )
    ids = [f"many-{status}" for status in EventStatus] + ["many-unknown"]
    async with pool.acquire() as conn, transaction(conn, settings):
        moved = await transition_many(conn, ids, EventStatus.ENQUEUED, expected=EventStatus.PENDING)
        assert await existing_events(conn, ids) == set(ids) - {"many-unknown"}
        assert await transition_many(conn, [], EventStatus.ENQUEUED) == set()
    assert moved == {"many-pending"}
    stored = dict(await pool.fetch("SELECT event_id, status FROM payment_events"))
    assert stored == {f"many-{s}": str(s) for s in EventStatus} | {"many-pending": "enqueued"}
    # Without `expected`, every source the table allows moves; terminal ones never do.
    async with pool.acquire() as conn, transaction(conn, settings):
        failed = await transition_many(conn, ids, EventStatus.FAILED)
    # many-pending is enqueued by now; pending, enqueued and processing may fail.
    assert failed == {"many-pending", "many-enqueued", "many-processing"}
    assert await pool.fetchval(
        "SELECT status FROM payment_events WHERE event_id = 'many-confirmed'"
    ) == ("confirmed")
