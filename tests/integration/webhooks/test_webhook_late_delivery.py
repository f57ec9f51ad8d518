"""A send paused past its lease records its outcome late (`record_webhook_attempt`).

The finalizing worker's own send (`payflow.webhooks.direct`) POSTs, the merchant answers,
and the process freezes (a GC pause, a frozen container: here the whole test process's
event loop stops in `time.sleep`) before the answer is recorded. Meanwhile the lease runs
out, a real `payflow relay` publishes the held job and a real `payflow worker` chain takes
it over against a real HTTP receiver (a thread of its own, so it answers during the
freeze). When the frozen send wakes, its answer is recorded:

* a 2xx after the chain dead-lettered the webhook makes it delivered, and the open dead
  letter is resolved "delivered late" (never left undelivered with the dead letter open
  when the merchant has it);
* a failure after the chain delivered changes nothing the chain recorded.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis

from payflow.config import Settings
from tests.integration.payments.charges.workers import payment_created
from tests.integration.webhooks.test_webhook_direct import Worker, _pending
from tests.processes import spawn_role

LEASE_S = 3.0


class Receiver:
    """A merchant's endpoint on its own thread: answers the n-th POST with `statuses[n]`
    (the last one from then on) and counts them."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.answered: list[int] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    n = len(receiver.answered)
                    status = receiver.statuses[min(n, len(receiver.statuses) - 1)]
                    receiver.answered.append(status)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def count(self) -> int:
        with self._lock:
            return len(self.answered)


@pytest.fixture
def late_settings(pipe_settings: Settings) -> Settings:
    # The charge is made in this process and must finish: the pipeline's 0.1 s charge
    # lease (made for takeovers) is shorter than a loaded machine's gateway call.
    return pipe_settings.model_copy(update={"webhook_lease_s": LEASE_S, "charge_lease_s": 30.0})


@pytest.fixture
def chain_processes(late_settings: Settings, tmp_path: Path) -> Iterator[Path]:
    """A real relay and a real worker on the webhooks queue only (the chains)."""
    env = {"WEBHOOK_LEASE_S": str(LEASE_S), "WEBHOOK_TIMEOUT_S": "2"}
    procs = [
        spawn_role(late_settings, tmp_path / "relay.log", "relay", **env),
        spawn_role(late_settings, tmp_path / "chain.log", "worker", "--queues", "webhooks", **env),
    ]
    try:
        yield tmp_path
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _psql(database_url: str, sql: str) -> str:
    done = subprocess.run(
        ["psql", database_url, "-tAc", sql], capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout.strip()


def _freeze_until(database_url: str, sql: str, limit_s: float = 60.0) -> None:
    """Block the whole process (no event loop runs) until `sql` answers 't'."""
    deadline = time.monotonic() + limit_s
    while _psql(database_url, sql) != "t":
        assert time.monotonic() < deadline, f"frozen {limit_s}s and still not: {sql}"
        time.sleep(0.2)


SNAPSHOT = (
    "SELECT concat_ws(' ', webhook_delivered_at, webhook_dead_at, webhook_lease_token,"
    " webhook_lease_until, webhook_chain_message, webhook_chain_attempt,"
    " webhook_next_attempt_at) FROM payments WHERE id = '{payment}'"
)


async def _run(
    pool: asyncpg.Pool, settings: Settings, receiver: Receiver, wake_when: str
) -> tuple[uuid.UUID, str]:
    """Finalize a payment in this process with its direct send, freeze the process once
    the merchant answered it until `wake_when` (SQL with `{payment}`) holds, then let the
    send record its answer. Returns the payment and its webhook columns (`SNAPSHOT`) as
    they were when the send woke."""
    redis = Redis.from_url(settings.redis_url)
    worker = Worker(pool, settings, redis)
    record = worker.sender.record
    payment_id = await _pending(pool, settings, receiver.url)
    woke: list[str] = []

    async def frozen_then_record(*args: Any, **kwargs: Any) -> int:
        _freeze_until(settings.database_url, wake_when.format(payment=payment_id))
        woke.append(_psql(settings.database_url, SNAPSHOT.format(payment=payment_id)))
        return await record(*args, **kwargs)

    worker.sender.record = frozen_then_record  # type: ignore[method-assign]
    try:
        await worker.processor.handle(payment_created(payment_id))
        await worker.direct.wait(90.0)
    finally:
        await worker.client.aclose()
        await redis.aclose()
    [snapshot] = woke
    return payment_id, snapshot


async def _state(pool: asyncpg.Pool, payment_id: uuid.UUID) -> asyncpg.Record:
    row: asyncpg.Record = await pool.fetchrow(
        "SELECT webhook_delivered_at, webhook_dead_at, webhook_attempts, webhook_lease_token,"
        " webhook_chain_message, webhook_next_attempt_at,"
        " (SELECT array_agg(http_status ORDER BY attempt) FROM webhook_attempt_log l"
        "   WHERE l.payment_id = p.id) AS answers"
        " FROM payments p WHERE id = $1",
        payment_id,
    )
    return row


async def test_a_2xx_recorded_after_the_dead_letter_is_delivered_late(
    pool: asyncpg.Pool, late_settings: Settings, chain_processes: Path
) -> None:
    receiver = Receiver([200, 500])  # the direct send's POST is answered; the chain's fail
    receiver.thread.start()
    try:
        dead = "SELECT webhook_dead_at IS NOT NULL FROM payments WHERE id = '{payment}'"
        payment_id, _ = await _run(pool, late_settings, receiver, dead)
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
    # The chain POSTed (and failed) through every tier while the direct send was frozen.
    assert receiver.answered[0] == 200 and receiver.answered[1:] == [500] * 4
    row = await _state(pool, payment_id)
    assert row["webhook_delivered_at"] is not None and row["webhook_dead_at"] is None
    assert row["webhook_attempts"] == 5 and row["answers"] == [500, 500, 500, 500, 200]
    [letter] = await pool.fetch(
        "SELECT resolved_at, resolved_by, resolution FROM dead_letter_queue"
        " WHERE source = 'webhook' AND subject_id = $1",
        str(payment_id),
    )
    assert letter["resolved_at"] is not None
    assert letter["resolution"] == (
        "delivered late: the merchant answered HTTP 200 after the webhook was dead-lettered"
    )
    assert (
        letter["resolved_by"].startswith("webhook sender ")
        and ":direct:" in (letter["resolved_by"])
    )
    # Nothing is left to send: the held job went out, and a replay is refused as resolved.
    unpublished = await pool.fetchval(
        "SELECT count(*) FROM outbox WHERE published_at IS NULL AND topic = 'webhook.deliver'"
        " AND payload->>'payment_id' = $1",
        str(payment_id),
    )
    assert unpublished == 0


async def test_a_failure_recorded_after_the_chain_delivered_changes_nothing_it_recorded(
    pool: asyncpg.Pool, late_settings: Settings, chain_processes: Path
) -> None:
    receiver = Receiver([500, 200])  # the direct send's POST fails; the chain delivers
    receiver.thread.start()
    try:
        delivered = "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = '{payment}'"
        payment_id, woke = await _run(pool, late_settings, receiver, delivered)
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
    assert receiver.answered == [500, 200]
    # The late record counted and logged its attempt, and touched nothing else.
    assert _psql(late_settings.database_url, SNAPSHOT.format(payment=payment_id)) == woke
    row = await _state(pool, payment_id)
    assert row["webhook_delivered_at"] is not None and row["webhook_dead_at"] is None
    assert row["webhook_lease_token"] is None and row["webhook_chain_message"] is not None
    assert row["webhook_attempts"] == 2 and row["answers"] == [200, 500]
    letters = await pool.fetchval(
        "SELECT count(*) FROM dead_letter_queue WHERE subject_id = $1", str(payment_id)
    )
    assert letters == 0
