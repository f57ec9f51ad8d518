"""Answered payments of one settlement account finalized together: a group commit.

Every success of a merchant posts its credit to the same settlement account (merchant,
currency), and PostgreSQL holds that row's lock from the balance change to the commit.
Sent alone, concurrent successes queue on the lock one by one: a busy merchant's
throughput is then one commit at a time, and every waiter costs the server CPU while the
machine is busy. The coalescer keeps at most one finalize statement in flight per
settlement account in this process; the answers that arrive meanwhile go together in the
next one (`finalize_answered_together`): one lock taken, one commit, however many
payments. Under light load a batch is one payment and nothing waits; under heavy load
batches grow by themselves, like PostgreSQL's own group commit.

What stays as alone: each payment's writes are exactly `finalize_answered`'s; a batch is
all or nothing and, when it fails in any way (a server error, a bound, a lost connection,
a payment whose arguments do not build), every payment in it is finalized alone
(`finalize_answered`, which decides a refused posting, a contended lock or a collision for
that payment only; a payment the batch did commit is then found final, and the caller's
transactional step says so). Other worker processes finalize the same account
concurrently, as before; the row lock orders them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass, field
from uuid import UUID

import asyncpg
import structlog

from payflow.db.tx import StatementBounds
from payflow.payments.finalize import (
    Answered,
    Finalized,
    finalize_answered,
    finalize_answered_together,
)

# Payments in one statement at most: the statement stays well inside its time bound.
MAX_BATCH = 64

log = structlog.get_logger("payflow.payments")


@dataclass(slots=True)
class _Waiting:
    answered: Answered
    done: asyncio.Future[Finalized] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class FinalizeCoalescer:
    """`finalize_answered(post_credit=True)`, coalesced per settlement account.

    One instance per process (the payment worker's); `finalize` is safe to call from any
    number of tasks. `credit_hold_s` and `bounds` are the worker's, as for
    `finalize_answered`.
    """

    def __init__(
        self, pool: asyncpg.Pool, *, credit_hold_s: float, bounds: StatementBounds
    ) -> None:
        self._pool = pool
        self._hold_s = credit_hold_s
        self._bounds = bounds
        self._queues: dict[tuple[UUID, str], list[_Waiting]] = {}
        self._drains: set[asyncio.Task[None]] = set()

    async def finalize(self, answered: Answered) -> Finalized:
        """Finalize one answered payment, with others of its settlement account when some
        are waiting. Returns and raises what `finalize_answered(post_credit=True)` would for
        this payment (`Finalized.changed` False: the caller takes the transactional step).
        A caller cancelled while its batch runs does not undo it: like a statement whose
        answer was lost, the finalize stands (a retry finds the payment final)."""
        payment = answered.payment
        key = (payment["merchant_id"], payment["currency"])
        waiting = _Waiting(answered)
        queue = self._queues.get(key)
        if queue is None:  # nothing in flight for this account: start its drain
            queue = self._queues[key] = [waiting]
            task = asyncio.create_task(self._drain(key), name="payflow.finalize.coalesce")
            self._drains.add(task)
            task.add_done_callback(self._drains.discard)
            # A drain cancelled before its first step never runs its `finally`.
            task.add_done_callback(functools.partial(self._abandon, key, queue))
        else:
            queue.append(waiting)
        return await asyncio.shield(waiting.done)

    def _abandon(
        self, key: tuple[UUID, str], queue: list[_Waiting], _task: asyncio.Task[None]
    ) -> None:
        """After a drain ended: the queue it was started for, if still there (it was
        cancelled before it ran), goes and its callers are cancelled."""
        if self._queues.get(key) is queue:
            del self._queues[key]
            for waiting in queue:
                waiting.done.cancel()

    async def _drain(self, key: tuple[UUID, str]) -> None:
        """Run the account's statements one after another until no answer waits."""
        queue = self._queues[key]
        batch: list[_Waiting] = []
        try:
            while queue:
                batch = queue[:MAX_BATCH]
                del queue[:MAX_BATCH]
                await self._run(batch)
        finally:
            del self._queues[key]
            for waiting in (*batch, *queue):  # unsettled only if this task was cancelled
                waiting.done.cancel()

    async def _run(self, batch: list[_Waiting]) -> None:
        if len(batch) > 1:
            try:
                async with self._pool.acquire() as conn:
                    results = await finalize_answered_together(
                        conn,
                        [w.answered for w in batch],
                        credit_hold_s=self._hold_s,
                        bounds=self._bounds,
                    )
            except Exception as exc:  # written nothing, or maybe all: each alone decides
                log.info(
                    "payflow.payments.batch_alone",
                    payments=len(batch),
                    error=type(exc).__name__,
                    sqlstate=getattr(exc, "sqlstate", None),
                )
            else:
                for waiting, result in zip(batch, results, strict=True):
                    _settle(waiting, result=result)
                return
        await asyncio.gather(*(self._alone(waiting) for waiting in batch))

    async def _alone(self, waiting: _Waiting) -> None:
        a = waiting.answered
        try:
            async with self._pool.acquire() as conn:
                result = await finalize_answered(
                    conn,
                    a.payment,
                    a.answer,
                    a.trace_id,
                    credit_hold_s=self._hold_s,
                    bounds=self._bounds,
                    webhook_lease=a.webhook_lease,
                    endpoint_lease=a.endpoint_lease,
                    post_credit=True,
                )
        except Exception as exc:
            _settle(waiting, exc=exc)
        else:
            _settle(waiting, result=result)


def _settle(
    waiting: _Waiting, *, result: Finalized | None = None, exc: BaseException | None = None
) -> None:
    if waiting.done.done():
        return
    if exc is not None:
        waiting.done.set_exception(exc)
        with contextlib.suppress(BaseException):  # seen: no "never retrieved" warning
            waiting.done.exception()
    else:
        assert result is not None
        waiting.done.set_result(result)
