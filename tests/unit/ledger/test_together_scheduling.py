"""The coalescer's scheduling alone (`payflow.ledger.together`): which drain carries a
queued posting. The statement is replaced by an answer per event, because what is under
test is the queue, not PostgreSQL (tests/integration/ledger/test_postings_together.py
posts through the real statement)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from payflow.config import DatabaseSettings
from payflow.ledger.together import PostingCoalescer, _Waiting


class _Answering(PostingCoalescer):
    """Answers each batch at once (None: "the full path decides"), then runs the callbacks
    it is given from the loop's ready queue, ahead of the drain's own done-callbacks."""

    def __init__(self, max_in_flight: int) -> None:
        super().__init__(None, DatabaseSettings(), max_in_flight=max_in_flight)  # type: ignore[arg-type]
        self.batches: list[list[str]] = []
        self.after_answer: list[Callable[[], None]] = []

    async def _run(self, batch: list[_Waiting]) -> None:
        self.batches.append([w.event_id for w in batch])
        for waiting in batch:
            waiting.done.set_result(None)
        loop = asyncio.get_running_loop()
        while self.after_answer:
            loop.call_soon(self.after_answer.pop(0))


async def test_a_posting_queued_as_the_last_drain_ends_starts_its_own() -> None:
    """Queued after the drain saw its queue empty but before the drain task is done: the
    posting must not wait for a drain that is no longer looking."""
    coalescer = _Answering(max_in_flight=1)
    late: list[asyncio.Future[object]] = []
    coalescer.after_answer.append(lambda: late.append(coalescer._enqueue("e2")))
    assert await asyncio.wait_for(coalescer.post("e1"), timeout=5) is None
    assert await asyncio.wait_for(late[0], timeout=5) is None
    assert coalescer.batches == [["e1"], ["e2"]]


async def test_postings_queued_while_a_batch_runs_go_together_and_a_duplicate_waits() -> None:
    coalescer = _Answering(max_in_flight=1)
    answers = await asyncio.wait_for(
        asyncio.gather(*(coalescer.post(e) for e in ["a", "b", "c", "b"])), timeout=5
    )
    assert answers == [None] * 4
    # All four queued before the first drain's first step; the duplicate "b" is never
    # queued a second time: it waits for the first and then takes the full path.
    assert coalescer.batches == [["a", "b", "c"]]
