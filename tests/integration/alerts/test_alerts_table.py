"""The `alerts` table on a real database: one open row per key, counting, resolution,
acknowledgement, the CLI, the constraints and a downgrade that refuses to drop alerts."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import Iterator

import asyncpg
import pytest

from payflow.alerts import Severity
from payflow.alerts.delivery import AlertNotice
from payflow.alerts.sink import CooldownAlertSink
from payflow.alerts.store import AlertStore
from payflow.config import Settings
from payflow.db import migrate
from payflow.db.migrations.statements import DataLossRefused
from tests.conftest import SERVER_URL
from tests.processes import run_payflow

OPEN_ROWS = (
    "SELECT key, count, message, severity FROM alerts WHERE resolved_at IS NULL ORDER BY key"
)


class Recorder:
    def __init__(self) -> None:
        self.notices: list[AlertNotice] = []

    async def send(self, notice: AlertNotice) -> None:
        self.notices.append(notice)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _sink(
    pool: asyncpg.Pool, settings: Settings, recorder: Recorder, clock: Clock
) -> CooldownAlertSink:
    return CooldownAlertSink(
        store=AlertStore(pool, settings, database=settings),
        delivery=recorder,
        cooldown_s=300.0,
        clock=clock,
    )


async def test_fire_counts_into_one_open_row_per_key_and_resolve_closes_it(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    recorder, clock = Recorder(), Clock()
    sink = _sink(pool, settings, recorder, clock)
    await sink.fire("dlq.growth", Severity.WARNING, "11 new", details={"new": 11})
    await sink.fire("dlq.growth", Severity.WARNING, "12 new", details={"new": 12})
    await sink.fire("dlq.growth", Severity.CRITICAL, "40 new", details={"new": 40})
    await sink.fire("zombies", Severity.WARNING, "3 stuck")
    rows = [tuple(r) for r in await pool.fetch(OPEN_ROWS)]
    assert rows == [("dlq.growth", 3, "40 new", "critical"), ("zombies", 1, "3 stuck", "warning")]
    row = await pool.fetchrow("SELECT * FROM alerts WHERE key = 'dlq.growth'")
    assert row["details"] == {"new": 40}
    assert row["last_seen"] >= row["first_seen"]
    # Delivered: the first firing and the escalation; the repeat was only counted.
    assert [(n.key, n.count, n.severity) for n in recorder.notices] == [
        ("dlq.growth", 1, Severity.WARNING),
        ("dlq.growth", 3, Severity.CRITICAL),
        ("zombies", 1, Severity.WARNING),
    ]
    assert recorder.notices[0].first_seen == row["first_seen"]

    await sink.resolve("dlq.growth")
    await sink.resolve("dlq.growth")  # already closed: no second resolution
    assert [tuple(r) for r in await pool.fetch(OPEN_ROWS)] == [("zombies", 1, "3 stuck", "warning")]
    assert [(n.status, n.count) for n in recorder.notices[3:]] == [("resolved", 3)]

    await sink.fire("dlq.growth", Severity.WARNING, "a new incident")
    history = await pool.fetch(
        "SELECT count, resolved_at IS NULL AS open FROM alerts WHERE key = 'dlq.growth' ORDER BY id"
    )
    assert [tuple(r) for r in history] == [(3, False), (1, True)]
    assert recorder.notices[-1].status == "firing"


async def test_concurrent_fires_of_one_key_meet_in_one_open_row(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    recorder = Recorder()
    sink = _sink(pool, settings, recorder, Clock())
    await asyncio.gather(
        *(sink.fire("recon.mismatch:hot", Severity.CRITICAL, f"n={n}") for n in range(30))
    )
    assert await pool.fetchval("SELECT count(*) FROM alerts") == 1
    assert await pool.fetchval("SELECT count FROM alerts") == 30
    assert len(recorder.notices) == 1  # delivered once


async def test_decimal_details_are_stored_exactly(pool: asyncpg.Pool, settings: Settings) -> None:
    from decimal import Decimal

    sink = _sink(pool, settings, Recorder(), Clock())
    await sink.fire(
        "recon.mismatch:full",
        Severity.CRITICAL,
        "ledger and balance differ",
        details={"diff": Decimal("0.000000000000000001"), "account": uuid.UUID(int=7)},
    )
    details = await pool.fetchval("SELECT details FROM alerts")
    assert details == {
        "diff": "0.000000000000000001",
        "account": "00000000-0000-0000-0000-000000000007",
    }


async def test_an_acknowledged_incident_sends_no_reminders(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    recorder, clock = Recorder(), Clock()
    sink = _sink(pool, settings, recorder, clock)
    store = AlertStore(pool, settings, database=settings)
    await sink.fire("stuck_claims", Severity.WARNING, "2 pending")
    acked = await store.acknowledge("stuck_claims", "carol")
    assert acked is not None and acked.acknowledged_by == "carol"
    again = await store.acknowledge("stuck_claims", "dave")  # the first one stays
    assert again is not None and again.acknowledged_by == "carol"
    assert await store.acknowledge("never.fired", "carol") is None
    clock.now += 600.0
    await sink.fire("stuck_claims", Severity.WARNING, "2 pending")
    assert [n.count for n in recorder.notices] == [1]  # counted, not re-delivered
    await sink.fire("stuck_claims", Severity.CRITICAL, "20 pending")  # a rise still pages
    assert [n.count for n in recorder.notices] == [1, 3]
    assert await pool.fetchval("SELECT count FROM alerts") == 3
    # A restarted process (a fresh sink) respects the acknowledgement too.
    restarted = Recorder()
    await _sink(pool, settings, restarted, Clock()).fire("stuck_claims", Severity.CRITICAL, "x")
    assert restarted.notices == []
    assert await pool.fetchval("SELECT count FROM alerts") == 4


async def test_a_suppressed_key_is_still_recorded(pool: asyncpg.Pool, settings: Settings) -> None:
    recorder = Recorder()
    sink = CooldownAlertSink(
        store=AlertStore(pool, settings, database=settings),
        delivery=recorder,
        max_keys=1,
        clock=Clock(),
    )
    await sink.fire("a", Severity.WARNING, "a")
    await sink.fire("b", Severity.CRITICAL, "b")  # memory full, a not stale: suppressed
    assert [n.key for n in recorder.notices] == ["a"]
    assert [tuple(r) for r in await pool.fetch(OPEN_ROWS)] == [
        ("a", 1, "a", "warning"),
        ("b", 1, "b", "critical"),
    ]


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        (
            "INSERT INTO alerts (key, severity, message) VALUES ('k', 'loud', 'm')",
            asyncpg.CheckViolationError,
        ),
        (
            "INSERT INTO alerts (key, severity, message) VALUES ('', 'info', 'm')",
            asyncpg.CheckViolationError,
        ),
        (
            "INSERT INTO alerts (key, severity, message, details) VALUES ('k', 'info', 'm', '[]')",
            asyncpg.CheckViolationError,
        ),
        (
            "INSERT INTO alerts (key, severity, message) VALUES ('open', 'info', 'second')",
            asyncpg.UniqueViolationError,
        ),
        (
            "UPDATE alerts SET acknowledged_at = now() WHERE key = 'open'",
            asyncpg.CheckViolationError,
        ),
    ],
)
async def test_the_table_enforces_its_invariants(
    pool: asyncpg.Pool, sql: str, error: type[Exception]
) -> None:
    await pool.execute("INSERT INTO alerts (key, severity, message) VALUES ('open', 'info', 'm')")
    with pytest.raises(error):
        await pool.execute(sql)


def _cli(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url, "COLUMNS": "250"}
    return run_payflow(args, env, timeout=60)


async def test_alerts_list_and_ack_commands(
    pool: asyncpg.Pool, settings: Settings, database_url: str
) -> None:
    sink = _sink(pool, settings, Recorder(), Clock())
    await sink.fire("zombies", Severity.WARNING, "3 events stuck in processing")
    await sink.fire("dlq.growth", Severity.CRITICAL, "40 new dead letters")
    await sink.fire("relay.lag", Severity.INFO, "gone again")
    await sink.resolve("relay.lag")

    listed = await asyncio.to_thread(_cli, database_url, "alerts", "list")
    assert listed.returncode == 0, listed.stderr
    assert "relay.lag" not in listed.stdout
    assert listed.stdout.index("dlq.growth") < listed.stdout.index("zombies")  # critical first

    every = await asyncio.to_thread(_cli, database_url, "alerts", "list", "--all")
    assert "relay.lag" in every.stdout and "resolved" in every.stdout

    acked = await asyncio.to_thread(_cli, database_url, "alerts", "ack", "zombies", "--by", "erin")
    assert acked.returncode == 0, acked.stderr
    row = await pool.fetchrow(
        "SELECT acknowledged_by, acknowledged_at FROM alerts WHERE key = $1", "zombies"
    )
    assert row["acknowledged_by"] == "erin" and row["acknowledged_at"] is not None
    listed = await asyncio.to_thread(_cli, database_url, "alerts", "list")
    assert "acknowledged by erin" in listed.stdout

    missing = await asyncio.to_thread(_cli, database_url, "alerts", "ack", "relay.lag")
    assert missing.returncode == 1
    assert "no open alert 'relay.lag'" in missing.stderr


@pytest.fixture
def empty_database_url() -> Iterator[str]:
    url = f"{SERVER_URL}/payflow_test_alerts_{uuid.uuid4().hex[:8]}"
    assert asyncio.run(migrate.ensure_database(url)) is True
    yield url

    async def drop() -> None:
        conn = await asyncpg.connect(migrate.admin_url(url))
        try:
            await conn.execute(f'DROP DATABASE "{migrate.database_name(url)}" WITH (FORCE)')
        finally:
            await conn.close()

    asyncio.run(drop())


def test_the_downgrade_refuses_to_drop_recorded_alerts(empty_database_url: str) -> None:
    url = empty_database_url
    migrate.upgrade(url, "0011_alerts")
    migrate.downgrade(url, "0010_ops_jobs")  # no alerts yet: allowed
    migrate.upgrade(url, "0011_alerts")

    async def insert() -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(
                "INSERT INTO alerts (key, severity, message) VALUES ('k', 'critical', 'm')"
            )
        finally:
            await conn.close()

    asyncio.run(insert())
    with pytest.raises(DataLossRefused, match="recorded alerts"):
        migrate.downgrade(url, "0010_ops_jobs")
    migrate.downgrade(url, "0010_ops_jobs", force=True)
