"""The relay's NOTIFY from the hot path's one-statement writers, on the real database: a
statement that writes a job due now wakes the relay at its commit; one whose jobs are
held back for the worker (a held credit, a direct webhook send) does not.

The NOTIFY of a one-statement writer lives in a plain SELECT CTE, which runs only while
the outer query reads it: a left join to it, with no column used, is removed by the
planner (and the relay then only found new rows on its poll)."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal

import asyncpg

from payflow.config import Settings
from payflow.db.tx import StatementBounds
from payflow.outbox.waker import RelayWaker
from payflow.outbox.writer import NOTIFY_CHANNEL
from payflow.payments.charges import claim_first_charge
from payflow.payments.finalize import Finalized, finalize_answered
from payflow.payments.gateway import ChargeResult
from payflow.payments.service import NewPayment, create_payment
from tests.integration.payments.test_held_credit import _merchant_with_account

BOUNDS = StatementBounds(lock_timeout_ms=2000, statement_timeout_ms=5000)
QUIET_S = 0.5  # how long a statement that must not wake the relay is given to do so
HEARD_S = 30.0  # how long an expected notification may take on a loaded machine


class Listener:
    """A session that LISTENs as the relay does and counts the notifications."""

    def __init__(self) -> None:
        self.heard = 0
        self.arrived = asyncio.Event()

    def __call__(self, *_args: object) -> None:
        self.heard += 1
        self.arrived.set()

    async def woken(self, wait_s: float = QUIET_S) -> bool:
        """True when a notification arrived (waiting at most `wait_s` for it)."""
        try:
            await asyncio.wait_for(self.arrived.wait(), wait_s)
        except TimeoutError:
            return False
        self.arrived.clear()
        return True


async def _listening(database_url: str) -> tuple[asyncpg.Connection, Listener]:
    conn = await asyncpg.connect(database_url)
    listener = Listener()
    await conn.add_listener(NOTIFY_CHANNEL, listener)
    return conn, listener


async def _create(
    pool: asyncpg.Pool, merchant: uuid.UUID, url: str | None, *, notify: bool = True
) -> uuid.UUID:
    async with pool.acquire() as conn:
        stored = await create_payment(
            conn,
            merchant,
            NewPayment(Decimal("4.00"), "USD", None, {}, url),
            idempotency_key=uuid.uuid4().hex,
            request_hash="h",
            trace_id="t",
            bounds=BOUNDS,
            notify=notify,
        )
    return uuid.UUID(stored.body["payment_id"])


async def test_a_created_payment_wakes_the_relay_and_a_replay_does_not(
    pool: asyncpg.Pool, database_url: str
) -> None:
    merchant, _ = await _merchant_with_account(pool)
    conn, listener = await _listening(database_url)
    try:
        key = uuid.uuid4().hex
        request = NewPayment(Decimal("4.00"), "USD", None, {}, None)
        async with pool.acquire() as writer:

            async def create() -> None:
                await create_payment(
                    writer,
                    merchant,
                    request,
                    idempotency_key=key,
                    request_hash="h",
                    trace_id="t",
                    bounds=BOUNDS,
                )

            await create()
            assert await listener.woken(HEARD_S)  # its payment.created job
            await create()  # a replay
            assert not await listener.woken()  # it wrote no job
        assert listener.heard == 1
    finally:
        await conn.close()


async def finalized(
    pool: asyncpg.Pool,
    payment_id: uuid.UUID,
    *,
    hold_s: float = 0.0,
    lease: tuple[str, float] | None,
    endpoint_lease: tuple[str, float] | None = None,
) -> Finalized:
    """Claim and finalize an approved pending payment as the worker does (its answer step
    in one statement), taking the webhook `lease` and the endpoint deliveries'
    `endpoint_lease` if given; then stop."""
    async with pool.acquire() as conn:
        payment, claim = await claim_first_charge(conn, payment_id, "t", 30.0, BOUNDS)
        assert claim is not None
        done = await finalize_answered(
            conn,
            payment,
            ChargeResult(approved=True, reference="gw"),
            None,
            credit_hold_s=hold_s,
            bounds=BOUNDS,
            webhook_lease=lease,
            endpoint_lease=endpoint_lease,
        )
    assert done.changed
    return done


async def test_a_finalize_wakes_the_relay_only_for_a_job_due_now(
    pool: asyncpg.Pool, database_url: str, settings: Settings
) -> None:
    merchant, _ = await _merchant_with_account(pool)
    url = "https://example.com/hook"
    held_both, due_webhook, due_credit = [await _create(pool, merchant, url) for _ in range(3)]
    conn, listener = await _listening(database_url)
    try:
        assert not await listener.woken()  # created before the LISTEN
        # Credit held for the worker, webhook held for its own send: nothing is due.
        await finalized(pool, held_both, hold_s=15.0, lease=("me", 30.0))
        assert not await listener.woken()
        await finalized(pool, due_webhook, hold_s=15.0, lease=None)
        assert await listener.woken(HEARD_S)
        await finalized(pool, due_credit, hold_s=0.0, lease=("me", 30.0))
        assert await listener.woken(HEARD_S)
    finally:
        await conn.close()
    due = await pool.fetchval(
        "SELECT count(*) FROM outbox WHERE published_at IS NULL AND next_attempt_at <= now()"
        " AND topic <> 'payment.created'"
    )
    assert due == 2  # the due webhook job and the due credit job


async def test_the_api_s_create_leaves_the_notify_to_the_waker(
    pool: asyncpg.Pool, database_url: str
) -> None:
    """`notify=False` (the API's create) commits the payment and its job without a NOTIFY;
    the waker's poke after the commit is what wakes the relay, and the job is there."""
    merchant, _ = await _merchant_with_account(pool)
    conn, listener = await _listening(database_url)
    try:
        payment_id = await _create(pool, merchant, None, notify=False)
        assert not await listener.woken()
        jobs = await pool.fetchval(
            "SELECT count(*) FROM outbox"
            " WHERE payload->>'payment_id' = $1 AND published_at IS NULL",
            str(payment_id),
        )
        assert jobs == 1
        async with RelayWaker(pool) as waker:
            waker.poke()
            assert await listener.woken(HEARD_S)
        assert listener.heard == 1
    finally:
        await conn.close()


async def test_the_waker_folds_a_burst_into_one_notify_per_interval(
    pool: asyncpg.Pool, database_url: str
) -> None:
    """The first poke after a quiet interval notifies at once; the pokes during the
    interval become one NOTIFY at its end; closing sends what is still pending."""
    conn, listener = await _listening(database_url)
    try:
        waker = RelayWaker(pool, interval_s=3.0)
        waker.poke()
        assert await listener.woken(HEARD_S)  # at once: nothing was sent before
        for _ in range(50):
            waker.poke()
        assert listener.heard == 1  # the burst waits for the interval's end (3 s)
        assert await listener.woken(HEARD_S)
        assert listener.heard == 2
        assert not await listener.woken(1.0)  # fifty pokes, one NOTIFY
        await waker.close()  # nothing pending: sends nothing
        assert waker.sent == 2
        assert not await listener.woken(0.5)
        waker.poke()  # a closed waker ignores pokes
        await asyncio.sleep(0.2)
        assert waker.sent == 2
    finally:
        await conn.close()


async def test_close_sends_the_pending_wake_up(pool: asyncpg.Pool, database_url: str) -> None:
    """A poke folded into the next interval is still sent when the waker closes."""
    conn, listener = await _listening(database_url)
    try:
        waker = RelayWaker(pool, interval_s=1.0)
        waker.poke()
        assert await listener.woken(HEARD_S)
        waker.poke()  # folded: due at the interval's end
        await waker.close()  # waits for it
        assert waker.sent == 2
        assert await listener.woken(HEARD_S)
        assert listener.heard == 2
    finally:
        await conn.close()


async def test_a_failed_notify_is_a_hint_lost_not_an_error(database_url: str) -> None:
    """A wake-up that cannot be sent (the pool is closed) is logged and dropped: the
    caller's commit stands and the relay's poll finds the job."""
    closed = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    await closed.close()
    waker = RelayWaker(closed)
    waker.poke()
    await waker.close()
    assert waker.sent == 0
