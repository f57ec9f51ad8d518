"""The charge-claim protocol on the real services (PostgreSQL, Redis, RabbitMQ): a gateway
charge is claimed in the database before it happens, and its answer is recorded before
anything depends on it (issue 7, item 3; the `payment:` half of item 2)."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from pathlib import Path

import asyncpg
import pytest
import structlog
from redis.asyncio import Redis

import payflow.payments.processor as processor_module
from payflow.api.auth import create_merchant
from payflow.bench.sink import WebhookSink
from payflow.bench.submit import DirectSubmitter
from payflow.config import Settings, load_settings
from payflow.db.tx import transaction
from payflow.errors import IdCollision, RetryableError
from payflow.payments.charges import ChargeInProgress, Claim, claim_charge
from payflow.payments.gateway import ChargeRequest, EmulatedGateway
from payflow.payments.processor import (
    SUCCEEDED,
    PaymentProcessor,
    credit_event_id,
    finalize,
    load_payment,
)
from tests.integration.pipeline.charge_workers import handle_after_barrier, payment_created
from tests.integration.pipeline.conftest import wait_until

ROOT = Path(__file__).resolve().parents[3]
UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"  # nothing listens there: the gateway is down


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client = Redis.from_url(load_settings().redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def key_prefix(redis: Redis) -> AsyncIterator[str]:
    """A Redis key prefix of this test alone; its keys are deleted afterwards."""
    prefix = f"payflow-test-{uuid.uuid4().hex[:12]}:"
    yield prefix
    async for key in redis.scan_iter(match=prefix + "*"):
        await redis.delete(key)


@pytest.fixture
def charge_settings(database_url: str, key_prefix: str) -> Settings:
    return load_settings(
        database_url=database_url,
        redis_key_prefix=key_prefix,
        gateway_delay_min_s=0.0,
        gateway_delay_max_s=0.0,
        gateway_failure_rate=0.0,
        charge_lease_s=30.0,
        lock_timeout_ms=5000,
    )


@pytest.fixture
def emulator(redis: Redis, key_prefix: str) -> Callable[..., EmulatedGateway]:
    """Emulators sharing this test's Redis memory (like workers sharing one gateway)."""

    def build(failure_rate: float = 0.0, seed: int | None = None) -> EmulatedGateway:
        return EmulatedGateway(redis, key_prefix, 0.0, 0.0, failure_rate, seed)

    return build


async def _pending_payment(pool: asyncpg.Pool, settings: Settings, url: str | None = None):
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "shop", admin=False)
    payment_id = await DirectSubmitter(pool, settings).submit_payment(
        merchant, "5.00", "USD", uuid.uuid4().hex, url
    )
    return merchant, payment_id


async def _claim(pool: asyncpg.Pool, settings: Settings, payment_id: uuid.UUID, lease_s: float):
    async with pool.acquire() as conn, transaction(conn, settings):
        claim = await claim_charge(conn, payment_id, "worker-that-dies", lease_s)
    assert isinstance(claim, Claim)
    return claim


async def _attempts(pool: asyncpg.Pool, payment_id: uuid.UUID) -> list[tuple[int, str]]:
    rows = await pool.fetch(
        "SELECT attempt, state FROM charge_attempts WHERE payment_id = $1 ORDER BY attempt",
        payment_id,
    )
    return [(row["attempt"], row["state"]) for row in rows]


async def _status(pool: asyncpg.Pool, payment_id: uuid.UUID) -> str:
    status: str = await pool.fetchval("SELECT status FROM payments WHERE id = $1", payment_id)
    return status


async def _jobs(pool: asyncpg.Pool, payment_id: uuid.UUID) -> list[str]:
    rows = await pool.fetch(
        "SELECT topic FROM outbox WHERE topic <> 'payment.created'"
        " AND (payload->>'payment_id' = $1 OR payload->>'event_id' = $2) ORDER BY topic",
        str(payment_id),
        credit_event_id(payment_id),
    )
    return [row["topic"] for row in rows]


def _handle_in_processes(
    database_url: str, key_prefix: str, payment_id: uuid.UUID, processes: int
) -> list[str]:
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(processes)
        with context.Pool(processes) as workers:
            return workers.starmap(
                handle_after_barrier,
                [(database_url, key_prefix, str(payment_id), 0.5, barrier)] * processes,
            )


async def test_concurrent_deliveries_in_separate_processes_charge_once(
    pool: asyncpg.Pool,
    charge_settings: Settings,
    database_url: str,
    key_prefix: str,
    emulator: Callable[..., EmulatedGateway],
) -> None:
    """Four OS processes handle the same `payment.created` at once (gateway latency
    0.5 s): one claims and charges, the others see its live claim and retry later (or,
    arriving after the commit, see a final payment). One charge, one credit."""
    _, payment_id = await _pending_payment(pool, charge_settings, "https://example.com/h")

    outcomes = await asyncio.to_thread(
        _handle_in_processes, database_url, key_prefix, payment_id, 4
    )

    assert outcomes.count("finalized") == 1, outcomes
    assert set(outcomes) - {"finalized"} <= {"duplicate", "in_progress"}, outcomes
    assert await emulator().charge_count(payment_id) == 1
    assert await _status(pool, payment_id) == SUCCEEDED
    assert await _attempts(pool, payment_id) == [(1, "approved")]
    assert await pool.fetchval("SELECT count(*) FROM payment_events") == 1
    assert await pool.fetchval(
        "SELECT amount FROM payment_events WHERE event_id = $1", credit_event_id(payment_id)
    ) == Decimal("5.00")
    assert await _jobs(pool, payment_id) == ["ledger.event", "webhook.deliver"]
    # The retry of a delivery that met the live claim finds the payment final.
    await PaymentProcessor(pool, charge_settings, emulator()).handle(payment_created(payment_id))
    assert await emulator().charge_count(payment_id) == 1
    assert await _jobs(pool, payment_id) == ["ledger.event", "webhook.deliver"]


async def test_a_live_claim_makes_a_redelivery_retry_without_calling_the_gateway(
    pool: asyncpg.Pool, charge_settings: Settings, emulator: Callable[..., EmulatedGateway]
) -> None:
    _, payment_id = await _pending_payment(pool, charge_settings)
    await _claim(pool, charge_settings, payment_id, lease_s=30.0)
    processor = PaymentProcessor(pool, charge_settings, emulator())
    with pytest.raises(ChargeInProgress):
        await processor.handle(payment_created(payment_id))
    assert await emulator().charge_count(payment_id) == 0
    assert await _attempts(pool, payment_id) == [(1, "claimed")]
    assert await _status(pool, payment_id) == "pending"


async def test_approved_charge_whose_worker_died_is_recovered_by_status_not_recharged(
    pool: asyncpg.Pool, charge_settings: Settings, emulator: Callable[..., EmulatedGateway]
) -> None:
    """The gateway approves, the worker dies before its commit. The redelivery runs
    against an emulator that would decline any fresh charge: it must ask `status()`,
    learn the approval, and end `succeeded` with the one charge, never `failed`."""
    _, payment_id = await _pending_payment(pool, charge_settings)
    await _claim(pool, charge_settings, payment_id, lease_s=0.2)
    first = await emulator().charge(ChargeRequest(payment_id, Decimal("5.00"), "USD"))
    assert first.approved
    # ... the worker dies here: no answer recorded, the lease runs out.
    await asyncio.sleep(0.3)
    declining = emulator(failure_rate=1.0)
    assert not declining.decide(payment_id).approved  # a fresh charge would be declined

    await PaymentProcessor(pool, charge_settings, declining).handle(payment_created(payment_id))

    assert await _status(pool, payment_id) == SUCCEEDED
    assert await declining.charge_count(payment_id) == 1
    assert await _attempts(pool, payment_id) == [(1, "superseded"), (2, "approved")]
    reference = await pool.fetchval(
        "SELECT gateway_reference FROM charge_attempts WHERE state = 'approved'"
    )
    assert reference == first.reference != ""
    assert await _jobs(pool, payment_id) == ["ledger.event"]


def _spawn_worker(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=settings.database_url,
        RABBITMQ_URL=settings.rabbitmq_url,
        REDIS_KEY_PREFIX=settings.redis_key_prefix,
        RETRY_TIERS_MS=",".join(str(t) for t in settings.retry_tiers_ms),
        GATEWAY_DELAY_MIN_S="30",
        GATEWAY_DELAY_MAX_S="30",
        GATEWAY_FAILURE_RATE="0",
        CHARGE_LEASE_S="1",
        LOG_JSON="false",
        DB_POOL_MIN="1",
        DB_POOL_MAX="4",
    )
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "payflow", "worker", "--queues", "payments"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


async def test_worker_killed_after_the_gateway_charged_ends_succeeded_with_one_charge(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
    redis: Redis,
    tmp_path: Path,
) -> None:
    """A real worker process is SIGKILLed while the gateway holds its (approved) charge.
    The broker redelivers to a worker whose gateway would decline a fresh charge; it
    waits out the dead worker's lease, takes the attempt over, asks `status()`."""
    settings = pipe_settings.model_copy(update={"retry_tiers_ms": (500, 1000, 2000)})
    relay = await start_roles(("relay",))
    payment_id = await submitter.submit_payment(merchant[0], "4.00", "USD", "k-kill", sink.url)
    gateway = EmulatedGateway(redis, settings.redis_key_prefix, 0.0, 0.0, 1.0)
    proc = _spawn_worker(settings, tmp_path / "worker.log")
    try:

        async def charged() -> bool:
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()
            return await gateway.charge_count(payment_id) == 1

        await wait_until(charged, what="the dying worker's gateway charge")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    worker = await start_roles(("worker",), settings=settings, gateway=gateway)
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="the redelivered payment finalized and notified",
    )
    await worker.stop()
    await relay.stop()
    assert await _status(pool, payment_id) == SUCCEEDED
    assert await gateway.charge_count(payment_id) == 1
    assert await _attempts(pool, payment_id) == [(1, "superseded"), (2, "approved")]
    assert await pool.fetchval("SELECT count(*) FROM payment_events") == 1
    assert len(sink.received) == 1
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0


async def test_emulator_is_deterministic_per_payment_id_and_idempotent(
    redis: Redis, key_prefix: str
) -> None:
    ids = [uuid.uuid4() for _ in range(200)]

    def build(prefix: str, failure_rate: float, seed: int | None) -> EmulatedGateway:
        return EmulatedGateway(redis, key_prefix + prefix, 0.0, 0.0, failure_rate, seed)

    def request(payment_id: uuid.UUID) -> ChargeRequest:
        return ChargeRequest(payment_id, Decimal("1.00"), "USD")

    one, other = build("a:", 0.5, 7), build("b:", 0.5, 7)
    answers = [await one.charge(request(i)) for i in ids]
    reversed_answers = [await other.charge(request(i)) for i in reversed(ids)]
    assert answers == reversed_answers[::-1]  # same seed, any order, any instance
    declines = sum(not answer.approved for answer in answers)
    assert 60 < declines < 140  # about half, from the hash
    reseeded = [build("c:", 0.5, 8).decide(i).approved for i in ids]
    assert reseeded != [answer.approved for answer in answers]
    assert [build("d:", 0.5, 7).decide(i) for i in ids] == answers

    # A repeat charge returns the first answer, whatever the repeat would decide itself.
    flip = build("a:", 0.0 if not answers[0].approved else 1.0, 7)
    assert await flip.charge(request(ids[0])) == answers[0]
    assert await flip.charge_count(ids[0]) == 2
    assert await flip.status(ids[0]) == answers[0]
    never = uuid.uuid4()
    assert await flip.status(never) is None
    assert await flip.charge_count(never) == 0


async def test_unreachable_emulator_is_a_retryable_gateway_failure() -> None:
    client = Redis.from_url(UNREACHABLE_REDIS, socket_connect_timeout=1)
    try:
        down = EmulatedGateway(client, "x:", 0.0, 0.0, 0.0)
        with pytest.raises(RetryableError):
            await down.charge(ChargeRequest(uuid.uuid4(), Decimal("1.00"), "USD"))
        with pytest.raises(RetryableError):
            await down.status(uuid.uuid4())
    finally:
        await client.aclose()


async def test_dead_claimed_unanswered_charge_stays_pending_for_review_then_recovers(
    pool: asyncpg.Pool,
    charge_settings: Settings,
    emulator: Callable[..., EmulatedGateway],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """on_dead with a claimed, unanswered attempt and the gateway unreachable: the
    payment stays pending, the attempt is `needs_review` (with an alert), the DLQ row
    is recorded, nothing is announced. The operator's replay later settles it."""
    _, payment_id = await _pending_payment(pool, charge_settings, "https://example.com/h")
    await _claim(pool, charge_settings, payment_id, lease_s=30.0)
    client = Redis.from_url(UNREACHABLE_REDIS, socket_connect_timeout=1)
    try:
        down = EmulatedGateway(client, "x:", 0.0, 0.0, 0.0)
        processor = PaymentProcessor(pool, charge_settings, down)
        with structlog.testing.capture_logs() as logs:
            monkeypatch.setattr(processor_module, "log", structlog.get_logger("payflow.payments"))
            await processor.on_dead(
                payment_created(payment_id, attempt=4), RetryableError("gateway unreachable")
            )
    finally:
        await client.aclose()

    payment = await pool.fetchrow(
        "SELECT status, processed_at FROM payments WHERE id = $1", payment_id
    )
    assert (payment["status"], payment["processed_at"]) == ("pending", None)
    assert await _attempts(pool, payment_id) == [(1, "needs_review")]
    reason = await pool.fetchval(
        "SELECT reason FROM charge_attempts WHERE payment_id = $1", payment_id
    )
    assert "gateway unreachable" in reason
    dead = await pool.fetch("SELECT source, subject_id, attempt FROM dead_letter_queue")
    assert [tuple(row) for row in dead] == [("payment", str(payment_id), 4)]
    assert await _jobs(pool, payment_id) == []
    alerts = [entry for entry in logs if entry["event"] == "payflow.payments.needs_review"]
    assert len(alerts) == 1 and alerts[0]["log_level"] == "error"

    # The operator replays (or a sweep re-announces) once the gateway is back: the new
    # attempt asks status(), the gateway never saw the charge, so it charges now.
    await PaymentProcessor(pool, charge_settings, emulator()).handle(payment_created(payment_id))
    assert await _status(pool, payment_id) == SUCCEEDED
    assert await emulator().charge_count(payment_id) == 1
    assert await _attempts(pool, payment_id) == [(1, "superseded"), (2, "approved")]


@pytest.mark.parametrize(("failure_rate", "final"), [(0.0, "succeeded"), (1.0, "failed")])
async def test_dead_claimed_charge_with_a_known_answer_is_finalized_by_it(
    pool: asyncpg.Pool,
    charge_settings: Settings,
    emulator: Callable[..., EmulatedGateway],
    failure_rate: float,
    final: str,
) -> None:
    _, payment_id = await _pending_payment(pool, charge_settings)
    await _claim(pool, charge_settings, payment_id, lease_s=30.0)
    gateway = emulator(failure_rate)
    await gateway.charge(ChargeRequest(payment_id, Decimal("5.00"), "USD"))
    await PaymentProcessor(pool, charge_settings, gateway).on_dead(
        payment_created(payment_id, attempt=4), RetryableError("answer lost")
    )
    assert await _status(pool, payment_id) == final
    expected = "approved" if final == SUCCEEDED else "declined"
    assert await _attempts(pool, payment_id) == [(1, expected)]
    credits = await pool.fetchval("SELECT count(*) FROM payment_events")
    assert credits == (1 if final == SUCCEEDED else 0)
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 1


async def test_dead_payment_never_claimed_is_failed(
    pool: asyncpg.Pool, charge_settings: Settings, emulator: Callable[..., EmulatedGateway]
) -> None:
    _, payment_id = await _pending_payment(pool, charge_settings)
    await PaymentProcessor(pool, charge_settings, emulator()).on_dead(
        payment_created(payment_id, attempt=4), RetryableError("database was down")
    )
    assert await _status(pool, payment_id) == "failed"
    assert await _attempts(pool, payment_id) == []
    assert await emulator().charge_count(payment_id) == 0


async def _foreign_row(owner_pool: asyncpg.Pool, payment_id: uuid.UUID) -> uuid.UUID:
    """Someone else's event at the id payflow derives for the payment's credit."""
    async with owner_pool.acquire() as conn:
        account: uuid.UUID = await conn.fetchval(
            "INSERT INTO accounts (asset) VALUES ('USD') RETURNING id"
        )
        await conn.execute(
            "INSERT INTO payment_events (event_id, account_id, amount, event_type)"
            " VALUES ($1, $2, 1000, 'deposit')",
            credit_event_id(payment_id),
            account,
        )
    return account


@pytest.mark.parametrize("account_exists", [False, True])
async def test_finalize_refuses_a_taken_payment_event_id(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    charge_settings: Settings,
    account_exists: bool,
) -> None:
    """`payment:<id>` already in payment_events: finalizing stops with IdCollision and
    commits nothing (both paths: the one-statement CTE when the merchant's settlement
    account exists, and the first-success path that opens it)."""
    merchant, payment_id = await _pending_payment(pool, charge_settings, "https://example.com/h")
    if account_exists:
        earlier = await DirectSubmitter(pool, charge_settings).submit_payment(
            merchant, "1.00", "USD", uuid.uuid4().hex, None
        )
        async with pool.acquire() as conn, transaction(conn, charge_settings):
            assert await finalize(conn, await load_payment(conn, earlier), SUCCEEDED, None)
    foreign = await _foreign_row(owner_pool, payment_id)
    async with pool.acquire() as conn:
        payment = await load_payment(conn, payment_id)
    events_before = await pool.fetchval("SELECT count(*) FROM payment_events")
    outbox_before = await pool.fetchval("SELECT count(*) FROM outbox")

    with pytest.raises(IdCollision):
        async with pool.acquire() as conn, transaction(conn, charge_settings):
            await finalize(conn, payment, SUCCEEDED, None)

    assert await _status(pool, payment_id) == "pending"
    assert await pool.fetchval("SELECT count(*) FROM payment_events") == events_before
    assert await pool.fetchval("SELECT count(*) FROM outbox") == outbox_before
    row = await pool.fetchrow(
        "SELECT account_id, amount, event_type FROM payment_events WHERE event_id = $1",
        credit_event_id(payment_id),
    )
    assert tuple(row) == (foreign, Decimal(1000), "deposit")


async def test_worker_meeting_a_taken_credit_id_parks_the_charge_for_review(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    charge_settings: Settings,
    emulator: Callable[..., EmulatedGateway],
) -> None:
    """The gateway approved, but the credit id is taken: the answer cannot finalize.
    The handler fails with IdCollision (a non-retryable error), on_dead learns the
    approval from status() and, refused again, leaves the payment pending for review,
    never failed and never crediting the foreign row's account."""
    _, payment_id = await _pending_payment(pool, charge_settings, "https://example.com/h")
    await _foreign_row(owner_pool, payment_id)
    processor = PaymentProcessor(pool, charge_settings, emulator())
    with pytest.raises(IdCollision) as raised:
        await processor.handle(payment_created(payment_id))
    await processor.on_dead(payment_created(payment_id), raised.value)

    assert await _status(pool, payment_id) == "pending"
    assert await emulator().charge_count(payment_id) == 1
    assert await _attempts(pool, payment_id) == [(1, "needs_review")]
    reason = await pool.fetchval("SELECT reason FROM charge_attempts")
    assert "approved" in reason and "IdCollision" in reason
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 1
    assert await _jobs(pool, payment_id) == []
