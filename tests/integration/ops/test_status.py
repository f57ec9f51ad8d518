"""`payflow status` and `payflow jobs`: on a clean database and on a broken one."""

from __future__ import annotations

import json

import aio_pika
import asyncpg

from payflow.broker.topology import WORK_QUEUES, declare_topology
from payflow.config import Settings
from payflow.jobs.spec import JobContext, Outcome
from payflow.ledger.posting import post_event
from payflow.ledger.records import EventType
from payflow.ops.scheduler import JOBS, run_job
from payflow.ops.status import collect_status
from tests.integration.ledger.helpers import new_account, new_event
from tests.integration.ops.conftest import RecordingSink, payflow_cli


async def _declare(settings: Settings) -> None:
    connection = await aio_pika.connect(settings.rabbitmq_url)
    try:
        await declare_topology(await connection.channel(), settings)
    finally:
        await connection.close()


async def _reconcile(pool: asyncpg.Pool, settings: Settings) -> None:
    ctx = JobContext(pool, settings, RecordingSink())
    for job in ("recon_hot", "recon_full"):
        assert await run_job(ctx, job) is not None


async def test_status_is_ok_on_a_clean_database_once_reconciled(
    pool: asyncpg.Pool, ops_settings: Settings
) -> None:
    await _declare(ops_settings)
    status = await collect_status(pool, ops_settings)
    assert status.problems == ["recon hot: never run", "recon full: never run"]

    await _reconcile(pool, ops_settings)
    status = await collect_status(pool, ops_settings)
    assert status.problems == [] and status.ok
    assert [(r.kind, r.outcome) for r in status.recon] == [("hot", "ok"), ("full", "ok")]
    assert status.broker == "ok"
    declared = [q for q in status.queues if q.kind != "feed"]
    assert len(declared) == len(WORK_QUEUES) * (2 + len(ops_settings.retry_tiers_ms))
    assert {q.messages for q in declared} == {0}
    # The notification feeds are not declared: probed for leftovers only, and their
    # absence is no problem.
    assert [q.messages for q in status.queues if q.kind == "feed"] == [None, None]
    assert status.alerts is None or status.alerts == []  # the alerts table may not exist yet

    done = payflow_cli(ops_settings, "status", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["ok"] is True and body["problems"] == []
    assert body["dlq_unresolved"] == 0 and body["stuck_claims"] == 0
    assert body["outbox_unpublished"] == 0 and body["outbox_oldest_age_s"] is None
    screen = payflow_cli(ops_settings, "status")
    assert screen.returncode == 0, screen.stderr
    assert "recon hot" in screen.stdout and "OK" in screen.stdout


async def test_status_names_a_tampered_balance_and_exits_1(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, ops_settings: Settings
) -> None:
    await _declare(ops_settings)
    account = await new_account(pool, ops_settings)
    await new_event(pool, ops_settings, account, "dep-1", "2", EventType.DEPOSIT)
    await post_event(pool, ops_settings, "dep-1")
    await owner_pool.execute("UPDATE accounts SET balance = balance + 5 WHERE id = $1", account)
    await _reconcile(pool, ops_settings)

    done = payflow_cli(ops_settings, "status", "--json")
    assert done.returncode == 1
    body = json.loads(done.stdout)
    assert body["ok"] is False
    assert [p.split(":")[0] for p in body["problems"]] == ["recon hot", "recon full"]
    assert "MISMATCH" in body["problems"][0] and "mismatches=1" in body["problems"][0]
    screen = payflow_cli(ops_settings, "status")
    assert screen.returncode == 1
    assert "WRONG: recon hot: MISMATCH" in screen.stdout


async def test_status_counts_dead_letters_zombies_lag_and_an_unreachable_broker(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, ops_settings: Settings
) -> None:
    await _reconcile(pool, ops_settings)
    await owner_pool.execute(
        "INSERT INTO dead_letter_queue (source, subject_id, error, attempt)"
        " VALUES ('webhook', 'w1', 'boom', 3)"
    )
    await owner_pool.execute(
        "INSERT INTO outbox (topic, payload, created_at)"
        " VALUES ('t', '{}', now() - interval '5 min')"
    )
    account = await new_account(pool, ops_settings)
    await new_event(pool, ops_settings, account, "ev-old", "1", EventType.DEPOSIT)
    await owner_pool.execute("UPDATE payment_events SET created_at = now() - interval '1 hour'")
    offline = ops_settings.model_copy(
        update={"rabbitmq_url": "amqp://guest:guest@127.0.0.1:1/", "status_broker_timeout_s": 1.0}
    )
    status = await collect_status(pool, offline)
    assert status.dlq_unresolved == 1 and status.outbox_unpublished == 1
    assert status.zombies["events_waiting"] == 1
    assert [p.split(":")[0] for p in status.problems] == [
        "dead letters unresolved",
        "zombies events_waiting",
        "outbox lag",
        "broker unreachable",
    ]
    assert status.queues == []


def test_jobs_run_by_hand_records_the_run_and_list_shows_it(ops_settings: Settings) -> None:
    unknown = payflow_cli(ops_settings, "jobs", "run", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().count("\n") == 0
    assert "unknown job 'nope'" in unknown.stderr and "recon_hot" in unknown.stderr

    done = payflow_cli(ops_settings, "jobs", "run", "check_stuck_claims")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"check_stuck_claims: {Outcome.OK} stuck=0"

    listed = payflow_cli(ops_settings, "jobs", "list")
    assert listed.returncode == 0, listed.stderr
    lines = {
        line.split()[1]: line
        for line in listed.stdout.splitlines()
        if "│" in line and line.split()[1] in JOBS
    }
    assert set(lines) == set(JOBS)
    assert "stuck=0" in lines["check_stuck_claims"] and "never" in lines["recon_full"]
