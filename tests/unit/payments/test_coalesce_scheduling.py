"""The finalize coalescer's scheduling alone (`payflow.payments.coalesce`): which drain
carries an answered payment. The statement is replaced by an answer per payment, because
what is under test is the queue per settlement account, not PostgreSQL
(tests/integration/payments/test_finalize_together.py finalizes through the real one)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from payflow.db.tx import StatementBounds
from payflow.payments.coalesce import FinalizeCoalescer, _Waiting
from payflow.payments.finalize import Answered, Finalized
from payflow.payments.gateway import ChargeResult

APPROVED = ChargeResult(approved=True, reference="gw")


class _Answering(FinalizeCoalescer):
    def __init__(self) -> None:
        bounds = StatementBounds(lock_timeout_ms=100, statement_timeout_ms=1000)
        super().__init__(None, credit_hold_s=30.0, bounds=bounds)  # type: ignore[arg-type]
        self.batches: list[list[str]] = []

    async def _run(self, batch: list[_Waiting]) -> None:
        self.batches.append([w.answered.payment["id"] for w in batch])
        for waiting in batch:
            waiting.done.set_result(Finalized(changed=True))


def _answered(payment_id: str, merchant: uuid.UUID, currency: str = "USD") -> Answered:
    payment = {"id": payment_id, "merchant_id": merchant, "currency": currency}
    return Answered(payment, APPROVED, None)  # type: ignore[arg-type]


async def test_one_accounts_answers_go_together_and_other_accounts_apart() -> None:
    coalescer = _Answering()
    shop, other = uuid.uuid4(), uuid.uuid4()
    done = await asyncio.wait_for(
        asyncio.gather(
            coalescer.finalize(_answered("p1", shop)),
            coalescer.finalize(_answered("p2", shop)),
            coalescer.finalize(_answered("q1", other)),
            coalescer.finalize(_answered("p3", shop, "EUR")),
            coalescer.finalize(_answered("p4", shop)),
        ),
        timeout=5,
    )
    assert all(d.changed for d in done)
    assert sorted(coalescer.batches) == [["p1", "p2", "p4"], ["p3"], ["q1"]]
    assert coalescer._queues == {}


async def test_a_drain_cancelled_before_it_ran_leaves_no_queue_behind() -> None:
    """Its callers are cancelled, and the account's next answer gets a drain of its own
    (a queue left behind would hold every later answer of that account forever)."""
    coalescer = _Answering()
    shop = uuid.uuid4()
    first = asyncio.ensure_future(coalescer.finalize(_answered("p1", shop)))
    await asyncio.sleep(0)  # queued, its drain created but not started
    for drain in list(coalescer._drains):
        drain.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(first, timeout=5)
    assert coalescer._queues == {}
    later = await asyncio.wait_for(coalescer.finalize(_answered("p2", shop)), timeout=5)
    assert later.changed and coalescer.batches == [["p2"]]
