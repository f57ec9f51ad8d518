"""The finalizing worker's own first send of a payment's webhook.

A payment's webhook job normally travels outbox -> relay -> RabbitMQ -> a sender, which
claims it, POSTs and records (`payflow.webhooks.sender`). When the worker that finalizes
the payment has a free send slot, it delivers its own outbox row instead, the way it
posts its own held credit (`payflow.ledger.posting.post_held_credit`):

1. the finalize statement (`finalize_answered`) takes the webhook's lease for this
   worker (`webhook_lease_token`, `webhook_lease_until` = now + `WEBHOOK_LEASE_S`) and
   writes the `webhook.deliver` job held back until that lease ends, in the same commit
   as the payment's status: the job is the send's guarantee;
2. after the commit, a background task POSTs, with no transaction open, within the
   lease (it stops before the lease ends by the worker's own clock, started before the
   statement was sent, so it always ends before the database's lease does);
3. one autocommitted statement records the attempt (`record_webhook_attempt`) and
   settles the held job: deleted on a delivery; on a failure due when the first retry
   tier ends, so a chain of the webhooks queue takes the job over from there.

A worker that dies anywhere in between leaves the lease to run out and the held job to
become due; the relay publishes it and a chain sends, as for any job (the POST may be
repeated with the same `webhook-id`, which receivers dedupe on). A message for the job
that meets the live lease is a duplicate (`payflow.webhooks.chains`), and the held job
is still there, so nothing is lost and no two sends overlap. The direct send is one
attempt in front of the chain's own: a job that keeps failing is POSTed once more
before it is dead-lettered.

The send never delays the payment worker: it runs as a task. The lease is taken only while
a send slot (`WEBHOOK_MAX_IN_FLIGHT`) is free (with every slot busy the job is due at once,
as before); the task takes its slot after the commit, waiting for one no later than the
POST may start, else it hands the job back. A slot is held only while sending, never while
the finalize waits for its turn on the account: a backlog of finalizes does not use the
slots up.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

import asyncpg
import structlog

from payflow.config import DatabaseSettings, WebhookSettings
from payflow.db.queries import load_queries
from payflow.db.tx import StatementBounds
from payflow.webhooks.sender import PaymentRow, WebhookSender
from payflow.webhooks.ssrf import UnsafeWebhookUrl

SQL = load_queries("payflow.webhooks")
log = structlog.get_logger("payflow.webhooks")


@dataclass(frozen=True, slots=True)
class Reservation:
    """The lease the finalize statement takes for one direct send: `token` names it,
    `lease_s` is its length in seconds, `start_by` the worker's monotonic time after which
    the POST may no longer start (read before the statement is sent, so the database's
    lease ends later than the worker thinks)."""

    token: str
    lease_s: float
    start_by: float


def reserve_lease(
    slots: asyncio.Semaphore, settings: WebhookSettings, worker: str, kind: str
) -> Reservation | None:
    """A fresh lease `<worker>:<kind>:<12 hex>` of `WEBHOOK_LEASE_S` for a direct send, or
    None when every one of `slots` is busy now (the job then goes through its queue).
    Takes no slot. The POST (at most `WEBHOOK_TIMEOUT_S`) must start within the first
    half of the lease's spare time, so it ends with at least that half to spare, as a
    queue's send ends with all of it: room for the record to land before the lease ends."""
    if slots.locked():
        return None
    lease_s = settings.webhook_lease_s
    spare_s = (lease_s - settings.webhook_timeout_s) / 2
    return Reservation(
        token=f"{worker}:{kind}:{uuid4().hex[:12]}",
        lease_s=lease_s,
        start_by=time.monotonic() + spare_s,
    )


class SendTasks:
    """The direct sends running in the background in this process."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, send: Coroutine[Any, Any, None]) -> None:
        """Run `send` as a task, kept until it ends."""
        task = asyncio.create_task(send)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self, timeout_s: float) -> None:
        """Let the sends finish for up to `timeout_s`, sends spawned meanwhile included;
        cancel what still runs then, and wait for it to end."""
        deadline = time.monotonic() + timeout_s
        while self._tasks and (left := deadline - time.monotonic()) > 0:
            await asyncio.wait(set(self._tasks), timeout=left)
        pending = set(self._tasks)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)


@contextlib.asynccontextmanager
async def handing_back(hand_back: Callable[[], Awaitable[None]]) -> AsyncIterator[None]:
    """Run the block, nothing sent yet; when it raises (a stop, a lost connection), call
    `hand_back` (shielded, best effort: the lease runs out anyway) and raise on."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            await asyncio.shield(hand_back())
        raise


async def take_slot(
    slots: asyncio.Semaphore, start_by: float, hand_back: Callable[[], Awaitable[None]]
) -> bool:
    """Acquire one of `slots`, waiting no later than `start_by` (monotonic seconds). When
    none came free in time, `hand_back` and False (nothing acquired); a wait cut short
    hands back too (`handing_back`)."""
    async with handing_back(hand_back):
        try:
            async with asyncio.timeout(max(start_by - time.monotonic(), 0.0)):
                await slots.acquire()
            return True
        except TimeoutError:
            pass
    await hand_back()  # every slot stayed busy: the queue sends it
    return False


class DirectSends:
    """Direct first sends of webhooks by the worker that finalized their payments."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: WebhookSettings,
        sender: WebhookSender,
        *,
        database: DatabaseSettings,
    ) -> None:
        self._pool = pool
        self._settings = settings
        self._sender = sender
        self._bounds = StatementBounds.of(database)  # its statements run outside a transaction
        self._tasks = SendTasks()

    def reserve(self) -> Reservation | None:
        """A fresh lease for one direct send, or None when every send slot is busy now
        (the job then goes through the queue). Takes no slot: `start` does."""
        return reserve_lease(self._sender.sending, self._settings, self._sender.worker, "direct")

    def start(self, reservation: Reservation, payment: PaymentRow, held_job: int) -> None:
        """Send in the background: `payment` is the finalized payment (its columns as
        `claim_first_charge` read them, with its terminal `status`), `held_job` the
        `webhook.deliver` job the finalize held back. The task waits for a send slot until
        the POST must start, else hands the job back."""
        self._tasks.spawn(self._send(reservation, payment, held_job))

    async def wait(self, timeout_s: float) -> None:
        """Let the sends in flight finish for up to `timeout_s` (a graceful stop), sends
        started meanwhile included; what still runs then is cancelled: a send cut short
        during its POST records a failed attempt, one that had not POSTed hands its job
        back (each leaves the job due now)."""
        await self._tasks.wait(timeout_s)

    async def _send(self, reservation: Reservation, payment: PaymentRow, held_job: int) -> None:
        payment_id: UUID = payment["id"]
        try:
            with structlog.contextvars.bound_contextvars(
                payment_id=str(payment_id), webhook_send="direct"
            ):
                back = functools.partial(self._hand_back, payment_id, reservation.token, held_job)
                if not await take_slot(self._sender.sending, reservation.start_by, back):
                    return
                try:
                    await self._post_and_record(reservation, payment, held_job)
                finally:
                    self._sender.sending.release()
        except Exception as exc:  # the held job stands behind it: log, never raise
            log.warning(
                "payflow.webhooks.direct_deferred",
                payment_id=str(payment_id),
                error=f"{type(exc).__name__}: {exc}",
            )

    async def _post_and_record(
        self, reservation: Reservation, payment: PaymentRow, held_job: int
    ) -> None:
        payment_id: UUID = payment["id"]
        token = reservation.token
        if time.monotonic() > reservation.start_by:  # started too late to end in the lease
            await self._hand_back(payment_id, token, held_job)
            return
        started = asyncio.Event()
        try:
            http_status, failure = await self._sender.post_within(
                payment, self._settings.webhook_timeout_s, started
            )
        except UnsafeWebhookUrl:  # a chain refuses it again and dead-letters the job
            await self._hand_back(payment_id, token, held_job)
            return
        except BaseException:  # a stop: count a POST it cut short, else hand back unsent
            if started.is_set():
                await self._sender.record_cancelled(payment_id, token, 1, held_job)
            else:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._hand_back(payment_id, token, held_job))
            raise
        # A failure waits out the first retry tier, then a chain takes the job over (an
        # answer that is not retried too: the chain's own POST then decides it).
        await asyncio.shield(
            self._sender.record(
                payment_id,
                token,
                http_status,
                failure,
                self._sender.retry_after_s(failure, 1),
                1,
                held_job=held_job,
            )
        )

    async def _hand_back(self, payment_id: UUID, token: str, held_job: int) -> None:
        """No POST was made: end the lease and make the held job due now."""
        async with self._pool.acquire() as conn:
            await conn.execute(
                SQL["hand_back_direct_webhook"],
                payment_id,
                token,
                held_job,
                self._bounds.lock_timeout_ms,
                timeout=self._bounds.timeout_s,
            )
        log.info("payflow.webhooks.direct_handed_back")
