"""The finalizing worker's own first sends of a payment's event to the merchant's endpoints.

An event's deliveries normally travel outbox -> relay -> RabbitMQ -> the endpoints queue's
sender, which claims each, POSTs and records (`payflow.webhooks.endpoints.sender`). When
the worker that finalizes a payment has a free send slot, it sends the deliveries of the
payment's event itself, as it sends the payment's own webhook (`payflow.webhooks.direct`):

1. the finalize statement records the event through `merchant_event_record_leasing`,
   which creates every delivery under this worker's lease (`WEBHOOK_LEASE_S`) and holds
   its `endpoint.deliver` job back until that lease ends, in the same commit as the
   payment's status: the held job is the send's guarantee;
2. after the commit, a background task reads the leased deliveries (`leased_deliveries`:
   the endpoint's URL and secrets, the event) and POSTs each, with no transaction open,
   within the lease (each POST starts before the lease's first half of spare time ends,
   by the worker's own clock read before the statement was sent);
3. one autocommitted statement per delivery records the attempt
   (`record_delivery_attempt`) and settles its held job: deleted on a 2xx; on a failure
   due when the first retry tier ends, so the endpoints queue takes the delivery over.

A delivery the task cannot send (no send slot in time, the endpoint disabled meanwhile,
started too late, a refused URL, a stop before its request) is handed back: its
lease ends and its held job is due now. A worker that dies anywhere leaves the leases to
run out and the held jobs to become due, and the relay publishes them; the POST may then be
repeated with the same `webhook-id`, which receivers dedupe on. Nothing is lost, and no
two sends of a delivery overlap (the claim needs the lease to have ended).

The sends never delay the payment worker: they run as a task. The leases are taken only
while a send slot (`WEBHOOK_MAX_IN_FLIGHT`, shared with the queue's sends) is free; each
send takes its slot after the commit, waiting for one no later than its POST may start,
else it hands its delivery back.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Sequence

import asyncpg
import structlog

from payflow.config import DatabaseSettings, WebhookSettings
from payflow.db.queries import load_queries
from payflow.db.tx import StatementBounds
from payflow.webhooks.direct import (
    Reservation,
    SendTasks,
    handing_back,
    reserve_lease,
    take_slot,
)
from payflow.webhooks.endpoints.sender import EndpointSender
from payflow.webhooks.ssrf import UnsafeWebhookUrl

SQL = load_queries("payflow.webhooks.endpoints")
log = structlog.get_logger("payflow.webhooks.endpoints")


class EndpointDirectSends:
    """Direct first sends of a finalized payment's event to the merchant's endpoints."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: WebhookSettings,
        sender: EndpointSender,
        *,
        database: DatabaseSettings,
    ) -> None:
        """`sender` is this process's endpoints sender: its send slots, POST and record."""
        self._pool = pool
        self._settings = settings
        self._sender = sender
        self._bounds = StatementBounds.of(database)  # its statements run outside a transaction
        self._tasks = SendTasks()

    def reserve(self) -> Reservation | None:
        """A fresh lease for the sends of one payment's event, or None when every send
        slot is busy now (the deliveries then go through the queue). Takes no slot: each
        send takes its own after the commit."""
        return reserve_lease(self._sender.sending, self._settings, self._sender.worker, "endpoints")

    def start(self, reservation: Reservation, held: Sequence[tuple[int, int]]) -> None:
        """Send in the background: `held` are the (delivery id, held job id) pairs the
        finalize made under the reservation's lease (`Finalized.held_deliveries`, not
        empty). Each send waits for a slot until its POST must start, else hands its
        delivery back."""
        self._tasks.spawn(self._send_all(reservation, tuple(held)))

    async def wait(self, timeout_s: float) -> None:
        """Let the sends in flight finish for up to `timeout_s` (a graceful stop); what
        still runs then is cancelled: a send cut short during its POST records a failed
        attempt, one that had not POSTed hands its delivery back (each job due now)."""
        await self._tasks.wait(timeout_s)

    async def _send_all(self, reservation: Reservation, held: tuple[tuple[int, int], ...]) -> None:
        jobs = dict(held)
        token = reservation.token
        try:
            # Nothing POSTed yet: a failure hands every delivery back to the queue.
            async with handing_back(functools.partial(self._hand_back, token, jobs)):
                rows = await self._leased(reservation, jobs)
            outcomes = await asyncio.gather(
                *(self._send_one(reservation, row, jobs[row["id"]]) for row in rows),
                return_exceptions=True,
            )
            failures = [o for o in outcomes if isinstance(o, Exception)]
        except Exception as exc:
            failures = [exc]
        for failure in failures:  # the held jobs stand behind them: log, never raise
            log.warning(
                "payflow.webhooks.endpoints.direct_deferred",
                error=f"{type(failure).__name__}: {failure}",
            )

    async def _leased(self, reservation: Reservation, jobs: dict[int, int]) -> list[asyncpg.Record]:
        """The deliveries still leased to this task, with what their POSTs need; the
        others (the endpoint disabled meanwhile, say) are handed back."""
        rows: list[asyncpg.Record] = []
        if time.monotonic() <= reservation.start_by:  # else too late to end in the lease
            async with self._pool.acquire() as conn:
                rows = await conn.fetch(
                    SQL["leased_deliveries"],
                    list(jobs),
                    reservation.token,
                    timeout=self._bounds.timeout_s,
                )
        found = {row["id"] for row in rows}
        if left := {d: j for d, j in jobs.items() if d not in found}:
            await self._hand_back(reservation.token, left)
        return rows

    async def _send_one(self, reservation: Reservation, row: asyncpg.Record, job: int) -> None:
        delivery_id: int = row["id"]
        token = reservation.token
        with structlog.contextvars.bound_contextvars(
            delivery_id=delivery_id, webhook_send="direct"
        ):
            slots = self._sender.sending
            back = functools.partial(self._hand_back, token, {delivery_id: job})
            if not await take_slot(slots, reservation.start_by, back):
                return
            try:
                await self._post_and_record(reservation, row, job)
            finally:
                slots.release()

    async def _post_and_record(
        self, reservation: Reservation, row: asyncpg.Record, job: int
    ) -> None:
        delivery_id: int = row["id"]
        token = reservation.token
        if time.monotonic() > reservation.start_by:  # too late to end in the lease: the
            # queue's send, which may start once the lease ends, would overlap this one
            await self._hand_back(token, {delivery_id: job})
            return
        started = asyncio.Event()
        began = time.monotonic()
        try:
            status, failure = await self._sender.post_within(row, started)
        except UnsafeWebhookUrl:  # the queue's sender refuses it again (counted there)
            await self._hand_back(token, {delivery_id: job})
            return
        except BaseException as exc:  # a stop: count a POST it cut short, else hand back
            if started.is_set():
                with contextlib.suppress(Exception):
                    await asyncio.shield(
                        self._sender.record(
                            delivery_id, token, None, exc, began, None, held_job=job
                        )
                    )
            else:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._hand_back(token, {delivery_id: job}))
            raise
        # A failure waits out the first retry tier, then the queue takes the job over.
        await asyncio.shield(
            self._sender.record(
                delivery_id,
                token,
                status,
                failure,
                began,
                self._sender.retry_after_s(failure, 1),
                held_job=job,
            )
        )

    async def _hand_back(self, token: str, jobs: dict[int, int]) -> None:
        """No POST was made for these deliveries: their leases end, their jobs are due now."""
        async with self._pool.acquire() as conn:
            await conn.execute(
                SQL["hand_back_direct_deliveries"],
                list(jobs),
                token,
                list(jobs.values()),
                timeout=self._bounds.timeout_s,
            )
        log.info("payflow.webhooks.endpoints.direct_handed_back", deliveries=len(jobs))
