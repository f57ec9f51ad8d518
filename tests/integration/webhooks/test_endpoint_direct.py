"""The finalizing worker's own first sends of a payment's event to the merchant's endpoints
(`payflow.webhooks.endpoints.direct`), on the real database, Redis (the gateway emulator),
RabbitMQ (the kill -9 test) and a real HTTP receiver: the finalize leases the deliveries
and holds their jobs back; the worker POSTs and settles each job; whatever goes wrong, the
held jobs bring the deliveries to the endpoints queue. Every POST is verified with the
`standardwebhooks` library."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis

from payflow.broker.messages import Envelope
from payflow.config import Settings
from payflow.payments.finalize import Answered, Finalized, finalize_answered_together
from payflow.payments.gateway import ChargeResult
from payflow.payments.processor import PaymentProcessor
from payflow.roles import default_gateway
from payflow.webhooks.direct import Reservation
from payflow.webhooks.endpoints import EndpointSender
from payflow.webhooks.endpoints.direct import EndpointDirectSends
from payflow.webhooks.sender import build_http_client
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.outbox.test_outbox_wake import BOUNDS, finalized
from tests.integration.payments.charges.workers import payment_created
from tests.integration.payments.test_finalize_answered import _claimed
from tests.integration.payments.test_held_credit import _merchant_with_account
from tests.integration.support import wait_until
from tests.integration.webhooks.endpoint_receiver import Receiver, Start, _async, _endpoint
from tests.processes import spawn_role


class Worker:
    """A payment worker with direct endpoint sends, and the endpoints queue's sender."""

    def __init__(self, pool: asyncpg.Pool, settings: Settings, redis: Redis) -> None:
        self.client = build_http_client(settings)
        self.sender = EndpointSender(
            pool, settings, self.client, database=settings, broker=settings
        )
        self.direct = EndpointDirectSends(pool, settings, self.sender, database=settings)
        self.processor = PaymentProcessor(
            pool,
            settings,
            default_gateway(settings, redis, redis_settings=settings),
            database=settings,
            endpoint_direct=self.direct,
        )

    async def close(self) -> None:
        await self.direct.wait(5.0)
        await self.client.aclose()


@contextlib.asynccontextmanager
async def running(pool: asyncpg.Pool, settings: Settings, **update: Any) -> AsyncIterator[Worker]:
    """A `Worker` on `settings` with `update`; on leaving, its sends finish (or stop).
    The charge is made in this process and must finish: the pipeline's 0.1 s charge lease
    is made for takeovers."""
    chosen = settings.model_copy(update={"charge_lease_s": 30.0, **update})
    redis = Redis.from_url(chosen.redis_url)
    made = Worker(pool, chosen, redis)
    try:
        yield made
    finally:
        await made.close()
        await redis.aclose()


@pytest.fixture
async def worker(pool: asyncpg.Pool, pipe_settings: Settings) -> AsyncIterator[Worker]:
    async with running(pool, pipe_settings) as made:
        yield made


def _message(delivery_id: int) -> Envelope:
    """The endpoints queue's message for a delivery, as the relay publishes it."""
    return Envelope(
        payload={"version": 1, "delivery_id": delivery_id},
        message_id=f"d-{delivery_id}",
        routing_key="endpoint.deliver",
        trace_id="",
        attempt=1,
        body=b"",
    )


async def _payment(pool: asyncpg.Pool, settings: Settings, merchant: uuid.UUID) -> uuid.UUID:
    return await DirectSubmitter(pool, settings).submit_payment(
        merchant, "7.50", "USD", uuid.uuid4().hex, None
    )


async def _deliveries(pool: asyncpg.Pool, payment_id: uuid.UUID) -> list[asyncpg.Record]:
    """The deliveries of the payment's event, by endpoint creation, each with its job
    (`job`: its id or None; `published`; `held`: due in the future) and attempt log."""
    rows: list[asyncpg.Record] = await pool.fetch(
        "SELECT d.id, d.event_id, d.endpoint_id, d.state, d.attempts, d.lease_token,"
        "       d.lease_until, o.id AS job, o.published_at IS NOT NULL AS published,"
        "       o.next_attempt_at, o.next_attempt_at > now() AS held,"
        "       (SELECT array_agg(a.http_status ORDER BY a.id) FROM webhook_delivery_attempts a"
        "         WHERE a.delivery_id = d.id) AS answers"
        " FROM webhook_deliveries d"
        " JOIN merchant_events ev ON ev.id = d.event_id AND ev.subject_id = $1"
        " JOIN webhook_endpoints e ON e.id = d.endpoint_id"
        " LEFT JOIN outbox o ON o.topic = 'endpoint.deliver'"
        "  AND o.payload ->> 'delivery_id' = d.id::text"
        " ORDER BY e.created_at",
        str(payment_id),
    )
    return rows


@dataclass(frozen=True, slots=True)
class Leased:
    """A merchant with one endpoint wanting every event, and a payment finalized with its
    deliveries leased to a worker that has not sent them yet."""

    merchant: uuid.UUID
    endpoint: uuid.UUID
    secret: str
    payment_id: uuid.UUID
    done: Finalized


async def _leased(
    pool: asyncpg.Pool, settings: Settings, url: str, lease: tuple[str, float]
) -> Leased:
    merchant, _ = await _merchant_with_account(pool)
    endpoint, secret = await _endpoint(pool, merchant, url, ["*"])
    payment_id = await _payment(pool, settings, merchant)
    done = await finalized(pool, payment_id, lease=None, endpoint_lease=lease)
    return Leased(merchant, endpoint, secret, payment_id, done)


async def test_the_finalizing_worker_delivers_to_each_endpoint_and_settles_the_jobs(
    pool: asyncpg.Pool, pipe_settings: Settings, receiver: Receiver, worker: Worker
) -> None:
    merchant, _ = await _merchant_with_account(pool)
    _, every = await _endpoint(pool, merchant, receiver.url("every"), ["*"])
    _, paid = await _endpoint(pool, merchant, receiver.url("paid"), ["payment.succeeded"])
    await _endpoint(pool, merchant, receiver.url("deposits"), ["deposit.credited"])
    await _endpoint(pool, merchant, receiver.url("off"), ["*"], enabled=False)
    payment_id = await _payment(pool, pipe_settings, merchant)

    await worker.processor.handle(payment_created(payment_id))
    await worker.direct.wait(5.0)

    first, second = await _deliveries(pool, payment_id)
    assert sorted(r.path for r in receiver.received) == ["/every", "/paid"]
    (to_every,) = receiver.at("every")
    (to_paid,) = receiver.at("paid")
    assert to_every.verifies_with(every) and to_paid.verifies_with(paid)
    assert to_every.webhook_id == to_paid.webhook_id == first["event_id"]
    for row in (first, second):
        assert (row["state"], row["attempts"], row["answers"]) == ("delivered", 1, [200])
        assert (row["lease_token"], row["lease_until"]) == (None, None)
        assert row["job"] is None  # deleted in the record's commit, never published
    # A copy of a delivery's message arriving now finds it delivered: no second POST.
    await worker.sender.handle(_message(first["id"]))
    assert len(receiver.received) == 2


async def test_a_failed_direct_send_is_taken_over_by_the_queue_after_the_first_tier(
    pool: asyncpg.Pool, pipe_settings: Settings, receiver: Receiver
) -> None:
    # A first tier long enough to tell "due when the tier ends" from "due now".
    tiers = (5000, 10000)
    async with running(pool, pipe_settings, retry_tiers_ms=tiers) as worker:
        settings = pipe_settings.model_copy(update={"retry_tiers_ms": tiers})
        await _failed_then_taken_over(pool, settings, receiver, worker)


async def _failed_then_taken_over(
    pool: asyncpg.Pool, pipe_settings: Settings, receiver: Receiver, worker: Worker
) -> None:
    merchant, _ = await _merchant_with_account(pool)
    _, secret = await _endpoint(pool, merchant, receiver.url("flaky"), ["*"])
    receiver.status["flaky"] = 500
    payment_id = await _payment(pool, pipe_settings, merchant)

    await worker.processor.handle(payment_created(payment_id))
    await worker.direct.wait(5.0)

    (row,) = await _deliveries(pool, payment_id)
    assert (row["state"], row["attempts"], row["answers"]) == ("pending", 1, [500])
    assert row["lease_token"] is None
    assert row["job"] is not None and not row["published"]  # the relay publishes it when due
    due_in = await pool.fetchval(
        "SELECT extract(epoch FROM $1 - clock_timestamp())::float8", row["next_attempt_at"]
    )
    assert 3.0 < due_in <= pipe_settings.retry_tiers_ms[0] / 1000
    # The relay's message reaches the endpoints queue's sender, which owns it from now on.
    receiver.status["flaky"] = 200
    await worker.sender.handle(_message(row["id"]))
    (row,) = await _deliveries(pool, payment_id)
    assert (row["state"], row["attempts"], row["answers"]) == ("delivered", 2, [500, 200])
    first, again = receiver.at("flaky")
    assert first.webhook_id == again.webhook_id == row["event_id"]
    assert first.verifies_with(secret) and again.verifies_with(secret)


async def test_a_worker_that_dies_after_finalizing_leaves_held_jobs_under_a_live_lease(
    pool: asyncpg.Pool, pipe_settings: Settings, receiver: Receiver, worker: Worker
) -> None:
    leased = await _leased(pool, pipe_settings, receiver.url("hook"), ("dead-worker", 1.0))
    secret, payment_id, done = leased.secret, leased.payment_id, leased.done
    # ... and the worker dies here, before its POST.
    (row,) = await _deliveries(pool, payment_id)
    assert done.held_deliveries == ((row["id"], row["job"]),)
    assert row["lease_token"] == "dead-worker" and row["held"] and not row["published"]
    assert row["next_attempt_at"] == row["lease_until"]  # held exactly as long as leased
    # A copy arriving while the lease is live finds it leased: no POST, the job stays.
    await worker.sender.handle(_message(row["id"]))
    assert receiver.received == []
    assert (await _deliveries(pool, payment_id))[0]["held"]

    async def lease_over() -> bool:
        (now,) = await _deliveries(pool, payment_id)
        return not now["held"]

    await wait_until(lease_over, limit_s=10, what="the held job to come due")
    await worker.sender.handle(_message(row["id"]))  # the relay's message, once due
    (row,) = await _deliveries(pool, payment_id)
    assert (row["state"], row["attempts"]) == ("delivered", 1)
    (request,) = receiver.at("hook")
    assert request.webhook_id == row["event_id"] and request.verifies_with(secret)


async def test_a_delivery_whose_endpoint_was_disabled_meanwhile_is_handed_back_unsent(
    pool: asyncpg.Pool, pipe_settings: Settings, receiver: Receiver, worker: Worker
) -> None:
    leased = await _leased(pool, pipe_settings, receiver.url("hook"), ("mine", 30.0))
    endpoint, payment_id, done = leased.endpoint, leased.payment_id, leased.done
    await pool.execute("UPDATE webhook_endpoints SET enabled = false WHERE id = $1", endpoint)

    worker.direct.start(Reservation("mine", 30.0, time.monotonic() + 10), done.held_deliveries)
    await worker.direct.wait(5.0)

    assert receiver.received == []
    (row,) = await _deliveries(pool, payment_id)
    assert (row["state"], row["attempts"], row["lease_token"]) == ("pending", 0, None)
    assert row["job"] is not None and not row["held"] and not row["published"]


async def test_with_every_send_slot_busy_the_deliveries_go_through_the_queue_at_once(
    pool: asyncpg.Pool, pipe_settings: Settings, receiver: Receiver
) -> None:
    async with running(pool, pipe_settings, webhook_max_in_flight=1) as busy:
        merchant, _ = await _merchant_with_account(pool)
        await _endpoint(pool, merchant, receiver.url("hook"), ["*"])
        payment_id = await _payment(pool, pipe_settings, merchant)
        async with busy.sender.sending:  # a queue's send holds the only slot
            await busy.processor.handle(payment_created(payment_id))
    assert receiver.received == []
    (row,) = await _deliveries(pool, payment_id)
    assert row["lease_token"] is None and row["attempts"] == 0
    assert row["job"] is not None and not row["held"] and not row["published"]


async def test_a_worker_killed_mid_direct_send_loses_nothing(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    start_roles: Start,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    """kill -9 of the payment worker while the merchant holds its direct POST: the lease
    runs out, the held job comes due, the relay publishes it and another worker delivers
    it under the same webhook-id; one delivery, delivered, nothing dead."""
    merchant, _ = await _merchant_with_account(pool)
    _, secret = await _endpoint(pool, merchant, receiver.url("slow"), ["*"])
    receiver.hold.add("slow")
    await start_roles(("relay",))
    env = {"WEBHOOK_LEASE_S": "3", "WEBHOOK_TIMEOUT_S": "2", "CHARGE_LEASE_S": "30"}
    args = ("worker", "--queues", "payments,endpoints")
    first = spawn_role(pipe_settings, tmp_path / "first.log", *args, **env)
    second: subprocess.Popen[bytes] | None = None
    try:
        payment_id = await _payment(pool, pipe_settings, merchant)
        await wait_until(lambda: _async(bool(receiver.at("slow"))), limit_s=60, what="the POST")
        (row,) = await _deliveries(pool, payment_id)
        assert row["lease_token"] is not None and ":endpoints:" in row["lease_token"]
        assert row["job"] is not None and not row["published"]  # held: a direct send's
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        receiver.hold.clear()
        second = spawn_role(pipe_settings, tmp_path / "second.log", *args, **env)

        async def delivered() -> bool:
            (now,) = await _deliveries(pool, payment_id)
            return bool(now["state"] == "delivered")

        await wait_until(delivered, limit_s=60, what="the delivery by the queue")
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=20)
    (row,) = await _deliveries(pool, payment_id)
    sent = receiver.at("slow")
    assert len(sent) == 2 and {r.webhook_id for r in sent} == {row["event_id"]}
    assert all(r.verifies_with(secret) for r in sent)
    assert row["state"] == "delivered" and row["job"] is not None and row["published"]
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0


async def test_a_send_that_gets_no_slot_before_its_start_by_is_handed_back_unsent(
    pool: asyncpg.Pool, pipe_settings: Settings, receiver: Receiver
) -> None:
    async with running(pool, pipe_settings, webhook_max_in_flight=1) as busy:
        leased = await _leased(pool, pipe_settings, receiver.url("hook"), ("mine", 30.0))
        merchant, payment_id, done = leased.merchant, leased.payment_id, leased.done
        async with busy.sender.sending:  # a queue's send holds the only slot throughout
            busy.direct.start(
                Reservation("mine", 30.0, time.monotonic() + 0.3), done.held_deliveries
            )
            await busy.direct.wait(5.0)
        (row,) = await _deliveries(pool, payment_id)
        assert (row["lease_token"], row["attempts"]) == (None, 0)
        assert row["job"] is not None and not row["held"] and not row["published"]
        # A slot free in time: the send waits for it, then delivers.
        second = await _payment(pool, pipe_settings, merchant)
        done = await finalized(pool, second, lease=None, endpoint_lease=("mine-2", 30.0))
        async with busy.sender.sending:
            busy.direct.start(
                Reservation("mine-2", 30.0, time.monotonic() + 10), done.held_deliveries
            )
            await asyncio.sleep(0.2)  # waiting for the slot, nothing sent yet
            assert receiver.received == []
        await busy.direct.wait(5.0)
    (row,) = await _deliveries(pool, second)
    assert (row["state"], row["attempts"], row["job"]) == ("delivered", 1, None)
    assert len(receiver.at("hook")) == 1


async def test_a_batch_finalize_leases_each_payments_deliveries_to_its_own_lease(
    pool: asyncpg.Pool, pipe_settings: Settings, receiver: Receiver
) -> None:
    merchant, _ = await _merchant_with_account(pool)
    await _endpoint(pool, merchant, receiver.url("a"), ["*"])
    await _endpoint(pool, merchant, receiver.url("b"), ["payment.succeeded"])
    payments = [await _claimed(pool, pipe_settings, merchant) for _ in range(3)]
    leases = [("lease-0", 30.0), None, ("lease-2", 30.0)]
    async with pool.acquire() as conn:
        done = await finalize_answered_together(
            conn,
            [
                Answered(p, ChargeResult(approved=True, reference="gw"), None, None, lease)
                for p, lease in zip(payments, leases, strict=True)
            ],
            credit_hold_s=30.0,
            bounds=BOUNDS,
        )
    for payment, lease, finalized_one in zip(payments, leases, done, strict=True):
        rows = await _deliveries(pool, payment["id"])
        assert len(rows) == 2
        if lease is None:  # no lease asked: due at once, nothing for the worker to send
            assert finalized_one.held_deliveries == ()
            assert all(r["lease_token"] is None and not r["held"] for r in rows)
        else:
            assert finalized_one.held_deliveries == tuple((r["id"], r["job"]) for r in rows)
            assert all(r["lease_token"] == lease[0] and r["held"] for r in rows)
