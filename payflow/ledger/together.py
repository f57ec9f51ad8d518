"""Postings sent together: the ledger's success path for several events in one commit.

The ledger worker handles its deliveries concurrently, and each posting's common path is
one autocommitted statement (`ledger_post_success`). Each such statement pays its own
round trip, its own commit (a WAL flush) and, on a busy account, its own turn on the
account's row lock held to that commit. `PostingCoalescer` keeps at most `max_in_flight`
statements in flight per process; the events that arrive meanwhile go together in the next
one (`post_success_together`): the same success path once per event, in ONE statement and
ONE commit, the events ordered by account, then event id. Under light load a batch is one
event and nothing waits; under load batches grow by themselves (at most `max_batch`).

Exactly as alone: each event's claim, transition, balance change and legs are those of
`post_in_one_statement`, and an event the success path does not decide (a duplicate, a
refused debit, an event that cannot move) gets None, so the caller takes the full path for
it. A batch is all or nothing: when it fails in any way (a server error, a bound, a lost
connection), each of its events is sent alone (`post_in_one_statement`), which answers for
that event only; an event the batch did commit then replays.

Locks: a posting takes its event's claim, then its account's row. The one order of a batch
keeps two batches of this process apart, and an event delivered twice to this process is
never in two batches at once (the second delivery waits for the first's batch and then
takes the full path, which replays it). Batches of two processes can still meet on one
event delivered to both, in opposite order on one account; PostgreSQL then refuses one
(a deadlock, after `deadlock_timeout`), whose events are sent alone.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from decimal import Decimal

import asyncpg
import structlog

from payflow.config import DatabaseSettings
from payflow.db.tx import StatementBounds
from payflow.ledger.posting import post_in_one_statement, posting_key, success_path_args
from payflow.ledger.records import Outcome, PostingResult
from payflow.ledger.states import SQL

MAX_BATCH = 64
MAX_IN_FLIGHT = 2

log = structlog.get_logger("payflow.ledger")


@dataclass(slots=True)
class _Waiting:
    event_id: str
    done: asyncio.Future[PostingResult | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class PostingCoalescer:
    """`post_in_one_statement`, coalesced across the process's concurrent postings.

    One per process and pool (the ledger worker's); `post` is safe from any number of
    tasks. Pass it to `post_event(..., together=)`.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: DatabaseSettings,
        *,
        max_batch: int = MAX_BATCH,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        if max_batch < 1 or max_in_flight < 1:
            raise ValueError("a batch holds at least one event, and one may be in flight")
        self._pool = pool
        self._settings = settings
        self._bounds = StatementBounds.of(settings)
        self._max_batch = max_batch
        self._max_in_flight = max_in_flight
        self._queue: list[_Waiting] = []
        self._running = 0  # drains whose loop has not ended (counted without a yield)
        self._drains: set[asyncio.Task[None]] = set()  # strong references only
        self._posting: dict[str, asyncio.Future[PostingResult | None]] = {}

    async def post(self, event_id: str) -> PostingResult | None:
        """The committed success of `event_id`, or None when the success path wrote nothing
        for it and the full path must decide. Raises what `post_in_one_statement` raises
        for it (an overflow, a lock timeout, a lost connection). A caller cancelled while
        its batch runs does not undo it: the posting stands and a retry replays it."""
        earlier = self._posting.get(event_id)
        if earlier is not None:  # this process is posting it already: wait, then replay
            await asyncio.wait([earlier])
            return None
        return await asyncio.shield(self._enqueue(event_id))

    def _enqueue(self, event_id: str) -> asyncio.Future[PostingResult | None]:
        """Queue `event_id` and start a drain if there is room; no yield in between."""
        waiting = _Waiting(event_id)
        self._posting[event_id] = waiting.done
        waiting.done.add_done_callback(functools.partial(self._posted, event_id))
        self._queue.append(waiting)
        if self._running < self._max_in_flight:
            self._running += 1
            task = asyncio.create_task(self._drain(), name="payflow.ledger.together")
            self._drains.add(task)
            task.add_done_callback(self._drains.discard)
        return waiting.done

    def _posted(self, event_id: str, done: asyncio.Future[PostingResult | None]) -> None:
        if self._posting.get(event_id) is done:
            del self._posting[event_id]

    async def _drain(self) -> None:
        batch: list[_Waiting] = []
        try:
            while self._queue:
                batch = self._queue[: self._max_batch]
                del self._queue[: self._max_batch]
                await self._run(batch)
        finally:
            # No yield since the queue was seen empty (or since a cancellation): a `post`
            # from now on sees room and starts a drain.
            self._running -= 1
            for waiting in batch:  # unsettled only if this task was cancelled
                waiting.done.cancel()

    async def _run(self, batch: list[_Waiting]) -> None:
        if len(batch) > 1:
            try:
                balances = await self._together([w.event_id for w in batch])
            except Exception as exc:  # written nothing, or maybe all: each alone decides
                log.info(
                    "payflow.ledger.batch_alone",
                    events=len(batch),
                    error=type(exc).__name__,
                    sqlstate=getattr(exc, "sqlstate", None),
                )
            else:
                for waiting, balance in zip(batch, balances, strict=True):
                    result = None
                    if balance is not None:
                        result = PostingResult(
                            waiting.event_id, Outcome.SUCCESS, replayed=False, balance_after=balance
                        )
                    _settle(waiting, result=result)
                return
        await asyncio.gather(*(self._alone(waiting) for waiting in batch))

    async def _together(self, event_ids: list[str]) -> list[Decimal | None]:
        """One statement, one commit: each event's balance after, in `event_ids`' order
        (None: the success path wrote nothing for it)."""
        keys = [posting_key(event_id) for event_id in event_ids]
        _, sources, credit_types, active_types = success_path_args(event_ids[0])
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                SQL["post_success_together"],
                keys,
                event_ids,
                sources,
                credit_types,
                active_types,
                self._bounds.lock_timeout_ms,
                timeout=self._bounds.timeout_s,
            )
        by_position: dict[int, Decimal | None] = {row["n"]: row["balance_after"] for row in rows}
        if len(by_position) != len(event_ids):
            raise AssertionError("one answer per event")
        return [by_position[n] for n in range(1, len(event_ids) + 1)]

    async def _alone(self, waiting: _Waiting) -> None:
        try:
            async with self._pool.acquire() as conn:
                result = await post_in_one_statement(conn, self._settings, waiting.event_id)
        except Exception as exc:
            _settle(waiting, exc=exc)
        else:
            _settle(waiting, result=result)


def _settle(
    waiting: _Waiting,
    *,
    result: PostingResult | None = None,
    exc: BaseException | None = None,
) -> None:
    if waiting.done.done():
        return
    if exc is not None:
        waiting.done.set_exception(exc)
        waiting.done.exception()  # retrieved: a cancelled caller leaves no warning
    else:
        waiting.done.set_result(result)
