"""Answered payments of one settlement account finalized together (group commit): the
statement `finalize_payments_together` and the worker's `FinalizeCoalescer`, on the real
database. Each payment ends exactly as alone; a batch is all or nothing; a member the
batch cannot decide is decided alone without costing the others."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.tx import StatementBounds
from payflow.errors import IdCollision
from payflow.payments.coalesce import FinalizeCoalescer
from payflow.payments.finalize import (
    Answered,
    credit_event_id,
    finalize_answered,
    finalize_answered_together,
)
from payflow.payments.gateway import ChargeResult
from tests.integration.payments.test_finalize_answered import _claimed
from tests.integration.payments.test_held_credit import _merchant_with_account

BOUNDS = StatementBounds(lock_timeout_ms=2000, statement_timeout_ms=10000)
APPROVED = ChargeResult(approved=True, reference="gw-1")
DECLINED = ChargeResult(approved=False, reason="card_declined", reference="gw-2")


async def _books(pool: asyncpg.Pool, account: uuid.UUID) -> tuple:
    """(balance, ledger rows, commits that wrote them, the account's journal total,
    postings whose legs do not sum to zero)."""
    return tuple(
        await pool.fetchrow(
            "SELECT (SELECT balance FROM accounts WHERE id = $1),"
            " (SELECT count(*) FROM balance_events WHERE account_id = $1),"
            " (SELECT count(DISTINCT xmin::text) FROM balance_events WHERE account_id = $1),"
            " (SELECT coalesce(sum(amount), 0) FROM balance_events WHERE account_id = $1),"
            " (SELECT count(*) FROM balance_events b WHERE b.account_id = $1"
            "    AND b.amount + coalesce((SELECT sum(l.amount) FROM ledger_legs l"
            "                    WHERE l.source_event_id = b.source_event_id), 0) <> 0)",
            account,
        )
    )


async def _own_balance_after(pool: asyncpg.Pool, payment: asyncpg.Record) -> Decimal | None:
    """The balance after the payment's own credit, as its journal row says."""
    value: Decimal | None = await pool.fetchval(
        "SELECT balance_after FROM balance_events WHERE source_event_id = $1",
        credit_event_id(payment["id"]),
    )
    return value


async def _statuses(pool: asyncpg.Pool, payments: list[asyncpg.Record]) -> list[str]:
    rows = await pool.fetch(
        "SELECT p.status FROM unnest($1::uuid[]) WITH ORDINALITY AS i(id, n)"
        " JOIN payments p ON p.id = i.id ORDER BY i.n",
        [p["id"] for p in payments],
    )
    return [r["status"] for r in rows]


async def test_answers_finalized_together_post_each_credit_once_in_one_commit(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, account = await _merchant_with_account(pool)
    payments = [await _claimed(pool, settings, merchant) for _ in range(4)]
    answers = [APPROVED, DECLINED, APPROVED, APPROVED]
    async with pool.acquire() as conn:
        done = await finalize_answered_together(
            conn,
            [Answered(p, a, None) for p, a in zip(payments, answers, strict=True)],
            credit_hold_s=30.0,
            bounds=BOUNDS,
        )
    # In the order given: each approval's balance after its own credit, the decline none.
    assert [(d.changed, d.posted, d.held_credit) for d in done] == [
        (True, Decimal("7.50"), None),
        (True, None, None),
        (True, Decimal("15.00"), None),
        (True, Decimal("22.50"), None),
    ]
    assert await _statuses(pool, payments) == ["succeeded", "failed", "succeeded", "succeeded"]
    for payment, d in zip(payments, done, strict=True):
        assert d.posted == await _own_balance_after(pool, payment)
    assert await _books(pool, account) == (Decimal("22.50"), 3, 1, Decimal("22.50"), 0)
    # No ledger.event job: every credit is posted; a second finalize changes nothing.
    jobs = await pool.fetchval("SELECT count(*) FROM outbox WHERE topic = 'ledger.event'")
    assert jobs == 0
    async with pool.acquire() as conn:
        again = await finalize_answered_together(
            conn,
            [Answered(p, APPROVED, None) for p in payments],
            credit_hold_s=30.0,
            bounds=BOUNDS,
        )
    assert [d.changed for d in again] == [False] * 4
    assert await _books(pool, account) == (Decimal("22.50"), 3, 1, Decimal("22.50"), 0)


async def test_a_batch_is_all_or_nothing(pool: asyncpg.Pool, settings: Settings) -> None:
    """One payment's derived credit id is taken by a foreign row: the statement raises and
    no payment of the batch is written."""
    merchant, account = await _merchant_with_account(pool)
    payments = [await _claimed(pool, settings, merchant) for _ in range(3)]
    await _take_credit_id(pool, account, payments[1]["id"])
    with pytest.raises(asyncpg.UniqueViolationError):
        async with pool.acquire() as conn:
            await finalize_answered_together(
                conn,
                [Answered(p, APPROVED, None) for p in payments],
                credit_hold_s=30.0,
                bounds=BOUNDS,
            )
    assert await _statuses(pool, payments) == ["pending"] * 3
    assert await _books(pool, account) == (Decimal("0"), 0, 0, Decimal("0"), 0)


async def test_the_coalescer_groups_one_accounts_answers_and_decides_a_bad_one_alone(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, account = await _merchant_with_account(pool)
    payments = [await _claimed(pool, settings, merchant) for _ in range(12)]
    together = FinalizeCoalescer(pool, credit_hold_s=30.0, bounds=BOUNDS)

    # Twelve answers at once, declines among them: they queue before the account's first
    # statement runs, so they share it; each caller gets its own payment's answer.
    answers = [DECLINED if i % 4 == 1 else APPROVED for i in range(12)]
    done = await asyncio.gather(
        *(together.finalize(Answered(p, a, None)) for p, a in zip(payments, answers, strict=True))
    )
    assert all(d.changed for d in done)
    for payment, answer, d in zip(payments, answers, done, strict=True):
        assert d.posted == (await _own_balance_after(pool, payment) if answer.approved else None)
    statuses = ["succeeded" if a.approved else "failed" for a in answers]
    assert await _statuses(pool, payments) == statuses
    balance, rows, commits, journal, unbalanced = await _books(pool, account)
    assert (balance, rows, journal, unbalanced) == (Decimal("67.50"), 9, Decimal("67.50"), 0)
    assert commits <= 2  # grouped, never one commit each

    # A batch with a payment that cannot be finalized: the batch falls back to each alone;
    # only that payment fails, with the error it has alone.
    more = [await _claimed(pool, settings, merchant) for _ in range(5)]
    await _take_credit_id(pool, account, more[2]["id"])
    outcomes = await asyncio.gather(
        *(together.finalize(Answered(p, APPROVED, None)) for p in more), return_exceptions=True
    )
    assert isinstance(outcomes[2], IdCollision)
    assert all(o.changed for i, o in enumerate(outcomes) if i != 2)  # type: ignore[union-attr]
    assert await _statuses(pool, more) == [
        "succeeded",
        "succeeded",
        "pending",
        "succeeded",
        "succeeded",
    ]
    for i, payment in enumerate(more):
        if i != 2:
            posted = outcomes[i].posted  # type: ignore[union-attr]
            assert posted == await _own_balance_after(pool, payment)
    balance, rows, _, journal, unbalanced = await _books(pool, account)
    assert (balance, rows, journal, unbalanced) == (Decimal("97.50"), 13, Decimal("97.50"), 0)
    # Alone, the same payment still says what it says alone.
    async with pool.acquire() as conn:
        with pytest.raises(IdCollision):
            await finalize_answered(
                conn, more[2], APPROVED, None, credit_hold_s=30.0, bounds=BOUNDS, post_credit=True
            )


async def _take_credit_id(pool: asyncpg.Pool, account: uuid.UUID, payment_id: uuid.UUID) -> None:
    """A payment_events row under the payment's derived credit id, written by someone
    else (the owner role: the service cannot write events for others' ids this way)."""
    await pool.execute(
        "INSERT INTO payment_events (event_id, account_id, amount, event_type, status)"
        " VALUES ($1, $2, 1, 'deposit', 'failed')",
        credit_event_id(payment_id),
        account,
    )
