"""Finalizing a payment: its terminal status, the merchant's credit event with its
ledger.event job and the webhook job commit together, once (`finalize_payment`).

Shared by the payment worker (`payflow.payments.processor`), the dead-lettering of a
payment and the operator's charge review (`payflow.payments.review`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from uuid import UUID

import asyncpg

from payflow.broker.topology import TOPIC_LEDGER_EVENT, TOPIC_WEBHOOK_DELIVER
from payflow.db import Connection
from payflow.db.pool import json_text
from payflow.db.queries import load_queries
from payflow.db.tx import StatementBounds
from payflow.errors import IdCollision
from payflow.ledger.accounts import record_event
from payflow.ledger.posting import success_path_args
from payflow.ledger.records import EventType
from payflow.money import format_amount, parse_amount
from payflow.outbox.writer import enqueue
from payflow.payments.gateway import ChargeResult

SQL = load_queries("payflow.payments")

SUCCEEDED = "succeeded"
FAILED = "failed"


def credit_event_id(payment_id: UUID) -> str:
    """The deterministic ledger event id of a payment's merchant credit."""
    return f"payment:{payment_id}"


async def merchant_account(conn: Connection, merchant_id: UUID, asset: str) -> UUID:
    """The merchant's account for `asset`, opened on first use (race-free)."""
    await conn.execute(SQL["open_merchant_account"], merchant_id, asset)
    account_id: UUID | None = await conn.fetchval(SQL["merchant_account"], merchant_id, asset)
    assert account_id is not None  # inserted or already there, and never deleted
    return account_id


@dataclass(frozen=True, slots=True)
class Finalized:
    """What `finalize_payment` did: `changed` False when the payment was already final;
    `held_credit` the (event id, outbox id) of a credit whose ledger.event job is held
    back for the caller to post after the commit (`post_held_credit`), else None;
    `held_webhook` the outbox id of the webhook.deliver job held back under the caller's
    webhook lease (`finalize_answered`'s `webhook_lease`), for its own send, else None;
    `posted` the merchant account's balance after the credit when the same commit posted
    it (`finalize_answered`'s `post_credit`), else None; `held_deliveries` the (delivery
    id, held `endpoint.deliver` job id) pairs of the payment's event made under the
    caller's endpoint lease (`finalize_answered`'s `endpoint_lease`), for its own sends."""

    changed: bool
    held_credit: tuple[str, int] | None = None
    held_webhook: int | None = None
    posted: Decimal | None = None
    held_deliveries: tuple[tuple[int, int], ...] = ()


async def finalize(
    conn: Connection, payment: asyncpg.Record, status: str, trace_id: str | None
) -> bool:
    """`finalize_payment` with the credit's job due at once; True when the payment moved
    (False: it was already final). Inside the caller's transaction."""
    return (await finalize_payment(conn, payment, status, trace_id)).changed


async def finalize_payment(
    conn: Connection,
    payment: asyncpg.Record,
    status: str,
    trace_id: str | None,
    *,
    credit_hold_s: float = 0.0,
) -> Finalized:
    """Move a pending payment to `status` with its credit and webhook job. Runs inside
    the caller's transaction. `credit_hold_s` > 0 holds the credit's ledger.event job back
    from the relay that long (the caller posts the credit itself after the commit and
    gets the job's id in `Finalized.held_credit`); 0 makes it due at once.

    Invariant: the status, the credit event with its `ledger.event` job (successes) and
    the `webhook.deliver` job (when a URL is set) are written together or not at all,
    under the payment's trace id (`trace_id` only when the payment has none):
    one statement normally, plus the account opening on a merchant's first success in
    a currency, all in the caller's transaction.

    Raises `IdCollision` when a `payment_events` row with the derived id
    ``payment:<uuid>`` already exists: a pending payment never has its credit, so that
    row was written by someone else; nothing is skipped, the transaction must roll back.
    """
    if not conn.is_in_transaction():
        raise RuntimeError("finalize must run inside the caller's transaction")
    statement = _statement(payment, status, trace_id, credit_hold_s, None, None, None, None, False)
    return await _finalize(conn, statement, None)


async def finalize_answered(
    conn: Connection,
    payment: asyncpg.Record,
    answer: ChargeResult,
    trace_id: str | None,
    *,
    credit_hold_s: float = 0.0,
    bounds: StatementBounds,
    webhook_lease: tuple[str, float] | None = None,
    endpoint_lease: tuple[str, float] | None = None,
    post_credit: bool = False,
) -> Finalized:
    """The whole answer step in ONE autocommitted statement: under the payment's row lock,
    record the gateway's `answer` on the open charge attempt and finalize the payment to
    succeeded|failed as `finalize_payment` does (credit held back `credit_hold_s`).

    `post_credit`: the same commit also posts a success's credit through the ledger's one
    success path (`ledger_post_success`; `Finalized.posted` is the balance after), so no
    ledger.event job is written. When that path cannot decide in the statement (a refused
    or overflowing balance change, the account's lock not granted within the bound, a
    deadlock), the statement writes nothing and is sent once more without posting: the
    credit's job is then held back `credit_hold_s` as without `post_credit`. When the path
    answers that the posting key is taken already, the job is written due now.

    `Finalized.changed` False means nothing was written: the payment is not pending, no
    attempt is open (another answer stands), or a success's settlement account does not
    exist yet; the caller then takes the transactional step (`lock_payment`,
    `record_answer`, `finalize_payment`), which decides each of those. `conn` must not be
    inside a transaction. The statement is bounded by `bounds` (`TimeoutError` or 55P03,
    both retryable; see `StatementBounds`). Raises `IdCollision` like `finalize_payment`
    (nothing written).

    `webhook_lease` (token, seconds): when the payment has a webhook URL, the same commit
    takes the webhook's lease under `token` and holds the webhook.deliver job back until
    the lease ends (`Finalized.held_webhook`), for the caller's own send
    (`payflow.webhooks.direct`); None: the job is due at once. `endpoint_lease` (token,
    seconds) likewise for the deliveries of the payment's event to the merchant's
    endpoints (`Finalized.held_deliveries`; `payflow.webhooks.endpoints.direct`).

    Invariant: the answer, the status, the credit with its job and the webhook job commit
    together or not at all, and the answer is recorded only on an open attempt.
    """
    if conn.is_in_transaction():
        raise RuntimeError("finalize_answered runs outside a transaction (it commits)")
    status = SUCCEEDED if answer.approved else FAILED
    args = (payment, status, trace_id, credit_hold_s, answer, bounds, webhook_lease, endpoint_lease)
    if post_credit and answer.approved:
        try:
            return await _finalize(conn, _statement(*args, True), bounds)
        except asyncpg.PostgresError as exc:
            if exc.sqlstate not in POSTING_UNDECIDED:
                raise
    return await _finalize(conn, _statement(*args, False), bounds)


@dataclass(frozen=True, slots=True)
class Answered:
    """One payment for `finalize_answered_together`: the payment row (as `finalize_answered`
    takes it), the gateway's answer, the message's trace id and the caller's webhook and
    endpoint leases (token, seconds) or None."""

    payment: asyncpg.Record
    answer: ChargeResult
    trace_id: str | None
    webhook_lease: tuple[str, float] | None = None
    endpoint_lease: tuple[str, float] | None = None


async def finalize_answered_together(
    conn: Connection,
    answered: Sequence[Answered],
    *,
    credit_hold_s: float,
    bounds: StatementBounds,
) -> list[Finalized]:
    """`finalize_answered(post_credit=True)` for several payments in ONE autocommitted
    statement (`finalize_payments_together`), so ONE commit: each payment's answer, status,
    event, webhook job and posted credit exactly as alone, in the order given.

    Why: every success of a merchant posts to the same settlement account, whose row lock
    is held from a posting's balance change to its commit. Alone, N successes queue N
    times on that lock and pay N commits; together they take it once and share a commit.

    All or nothing: when the statement raises (any server error: a refused or contended
    posting, a lock or statement bound, an id collision), nothing of any payment is
    written and the caller finalizes each alone (`finalize_answered`), which decides
    them one by one. A `TimeoutError` is as `finalize_answered`'s: the statement may have
    committed, and every finalize is a compare-and-set, so a retry is safe. Returns one
    `Finalized` per payment, in order; `changed` False means the caller takes the
    transactional step for that payment, as after `finalize_answered`. `conn` must not be
    inside a transaction.
    """
    if conn.is_in_transaction():
        raise RuntimeError("finalize_answered_together runs outside a transaction (it commits)")
    statements = [
        _statement(
            a.payment,
            SUCCEEDED if a.answer.approved else FAILED,
            a.trace_id,
            credit_hold_s,
            a.answer,
            bounds,
            a.webhook_lease,
            a.endpoint_lease,
            True,
        )
        for a in answered
    ]
    each = (s.args for s in statements)
    columns: list[list[Any]] = [list(values) for values in zip(*each, strict=True)]
    for jsonb in (9, 11):  # the credit and webhook job payloads travel as text
        columns[jsonb] = [None if v is None else json_text(v) for v in columns[jsonb]]
    shared = next((s.args[20:23] for s in statements if s.args[19] is not None), (None,) * 3)
    rows = await conn.fetch(
        SQL["finalize_payments_together"],
        *columns[:20],
        *shared,
        *columns[23:],
        timeout=bounds.timeout_s,
    )
    if len(rows) != len(statements):
        raise AssertionError("one row per payment, in order")
    results = [_read(s, row) for s, row in zip(statements, rows, strict=True)]
    if any(r is None for r in results):
        raise AssertionError("the answered statement finalizes a success only with its account")
    return [r for r in results if r is not None]


# Server errors after which a finalize that also posts wrote nothing and is sent again
# without posting: the success path's "full path decides" (PF001), a balance that would
# overflow its column, the account's lock not granted in time, a deadlock.
POSTING_UNDECIDED = frozenset({"PF001", "22003", "55P03", "40P01"})


@dataclass(frozen=True, slots=True)
class _Statement:
    """One payment's `finalize_payment` call: its parameters and what reading its row
    needs."""

    payment: asyncpg.Record
    event_id: str | None  # the credit's event id (successes), else None
    trace_id: str | None
    credit_amount: str
    credit_job: dict[str, Any]
    args: tuple[Any, ...]
    answered: bool
    credit_hold_s: float
    post_credit: bool


def _statement(
    payment: asyncpg.Record,
    status: str,
    trace_id: str | None,
    credit_hold_s: float,
    answer: ChargeResult | None,
    bounds: StatementBounds | None,
    webhook_lease: tuple[str, float] | None,
    endpoint_lease: tuple[str, float] | None,
    post_credit: bool,
) -> _Statement:
    # Derived rows inherit the payment's own trace id; the message's only stands in
    # for a payment stored without one.
    trace_id = payment["trace_id"] or trace_id
    payment_id: UUID = payment["id"]
    event_id = credit_event_id(payment_id) if status == SUCCEEDED else None
    amount: Decimal = payment["amount"]
    credit_amount = format_amount(amount)  # exact: normalize() rounded at 28 digits
    credit_job = {"version": 1, "event_id": event_id}
    webhook_job = {"version": 1, "payment_id": str(payment_id)} if payment["webhook_url"] else None
    # Validated like any recorded event; a decline (or dead-lettering) never parses it.
    credit_value = parse_amount(credit_amount, payment["scale"]) if event_id else None
    args = _statement_args(
        payment,
        status,
        event_id,
        credit_value,
        trace_id,
        credit_job,
        webhook_job,
        credit_hold_s,
        answer,
        bounds,
        webhook_lease,
        endpoint_lease,
        post_credit,
    )
    return _Statement(
        payment,
        event_id,
        trace_id,
        credit_amount,
        credit_job,
        args,
        answer is not None,
        credit_hold_s,
        post_credit,
    )


def _read(statement: _Statement, row: asyncpg.Record) -> Finalized | None:
    """What a committed `finalize_payment` row says, or None when a success found no
    settlement account (only the transactional finalize meets that: it opens one)."""
    event_id = statement.event_id
    if not row["finalized"]:
        return Finalized(changed=False)
    if statement.answered and event_id is not None and not row["credited"]:
        raise AssertionError("the answered statement finalizes a success only with its account")
    held_webhook: int | None = row["held_webhook_job"]
    held_deliveries = _held_deliveries(row)
    if statement.post_credit and row["credited"]:  # posted in the commit, or its job due now
        return Finalized(
            changed=True,
            held_webhook=held_webhook,
            posted=row["balance_after"],
            held_deliveries=held_deliveries,
        )
    if event_id is not None and row["credited"] and statement.credit_hold_s > 0:
        return Finalized(
            changed=True,
            held_credit=(event_id, row["credit_job"]),
            held_webhook=held_webhook,
            held_deliveries=held_deliveries,
        )
    if event_id is not None and not row["credited"]:
        return None
    return Finalized(changed=True, held_webhook=held_webhook, held_deliveries=held_deliveries)


def _held_deliveries(row: asyncpg.Record) -> tuple[tuple[int, int], ...]:
    """The (delivery id, held job id) pairs a finalize row names, in its order."""
    deliveries: list[int] | None = row["held_deliveries"]
    jobs: list[int] | None = row["held_delivery_jobs"]
    if not deliveries or not jobs:
        return ()
    return tuple(zip(deliveries, jobs, strict=True))


async def _finalize(
    conn: Connection, statement: _Statement, bounds: StatementBounds | None
) -> Finalized:
    payment = statement.payment
    event_id = statement.event_id
    try:
        row = await conn.fetchrow(
            SQL["finalize_payment"],
            *statement.args,
            timeout=None if bounds is None else bounds.timeout_s,
        )
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name == "payment_events_pkey":
            raise _collision(event_id) from None
        raise
    assert row is not None
    done = _read(statement, row)
    if done is not None:
        return done
    assert event_id is not None
    # The merchant's first success in this currency: open the account (race-free),
    # then write the credit and its job; still the same transaction.
    account_id = await merchant_account(conn, payment["merchant_id"], payment["currency"])
    recorded = await record_event(
        conn,
        event_id=event_id,
        account_id=account_id,
        amount=statement.credit_amount,
        event_type=EventType.PAYMENT_CREDIT,
        scale=payment["scale"],
        trace_id=statement.trace_id,
    )
    if not recorded:
        raise _collision(event_id)
    await enqueue(conn, TOPIC_LEDGER_EVENT, statement.credit_job, statement.trace_id)
    return Finalized(
        changed=True, held_webhook=row["held_webhook_job"], held_deliveries=_held_deliveries(row)
    )


def _collision(event_id: str | None) -> IdCollision:
    return IdCollision(
        f"event id {event_id!r} is derived by payflow but already exists; refusing to finalize"
    )


def _statement_args(
    payment: asyncpg.Record,
    status: str,
    event_id: str | None,
    credit_value: Decimal | None,
    trace_id: str | None,
    credit_job: dict[str, Any],
    webhook_job: dict[str, Any] | None,
    credit_hold_s: float,
    answer: ChargeResult | None,
    bounds: StatementBounds | None,
    webhook_lease: tuple[str, float] | None,
    endpoint_lease: tuple[str, float] | None,
    post_credit: bool,
) -> tuple[Any, ...]:
    """`finalize_payment`'s 25 parameters, in order (the query's comment names them)."""
    posting: tuple[str | None, list[str] | None, list[str] | None, list[str] | None]
    posting = (None, None, None, None)
    if post_credit and event_id is not None:
        if bounds is None:
            raise RuntimeError("a finalize that posts its credit is bounded (autocommit only)")
        posting = success_path_args(event_id)
    return (
        payment["id"],
        status,
        payment["merchant_id"],
        payment["currency"],
        event_id,
        credit_value,
        EventType.PAYMENT_CREDIT.value,
        trace_id,
        TOPIC_LEDGER_EVENT,
        credit_job,
        TOPIC_WEBHOOK_DELIVER,
        webhook_job,
        credit_hold_s,
        None if answer is None else ("approved" if answer.approved else "declined"),
        None if answer is None else answer.reason,
        None if answer is None else answer.reference,
        None if bounds is None else bounds.lock_timeout_ms,
        None if webhook_lease is None else webhook_lease[0],
        None if webhook_lease is None else webhook_lease[1],
        *posting,
        None if endpoint_lease is None else endpoint_lease[0],
        None if endpoint_lease is None else endpoint_lease[1],
    )
