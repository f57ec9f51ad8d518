"""Exactly-once posting of payment events to the ledger.

One transaction holds all of it: the idempotency claim, the event's state
transition, the balance change, the ledger row and the recorded outcome. The
unique key on `processed_events` serialises duplicate deliveries; the guarded
`UPDATE accounts ... WHERE balance + delta >= 0` removes the read-then-write race.

The common path (a fresh event whose balance change is allowed) is ONE statement sent in
autocommit: `ledger_post_success` (migration 0020) claims, confirms, changes the balance and
appends the ledger row, and PostgreSQL commits it before answering. A hot account's row lock
is then held only while the server works, never across a network hop or a busy event loop
(it was ~10 ms a posting under load, which capped one merchant at ~100 credits/s). Every
other case (a duplicate, a refused debit, an event that cannot move, an overflow) writes
nothing there and takes the full path below, in explicit transactions. A waiter queues on
the account lock for up to `lock_timeout` instead of failing at once (the seed's NOWAIT
collapsed).

A balance that would not fit its column (SQLSTATE 22003, numeric_value_out_of_range)
is decided like insufficient funds: the attempt rolls back and a second transaction
records the terminal `amount_overflow` outcome, fails the event with `last_error`
and logs the alert `payflow.ledger.overflow`. It is never retried or dead-lettered.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import TYPE_CHECKING

import asyncpg
import structlog

from payflow.config import DatabaseSettings
from payflow.db import Connection
from payflow.db.tx import StatementBounds, transaction
from payflow.errors import (
    AlreadyProcessed,
    DatabaseError,
    InsufficientFunds,
    NotFound,
    RetryableError,
)
from payflow.idempotency import idempotency_key
from payflow.ledger import states
from payflow.ledger.records import EventType, Outcome, PostingResult
from payflow.ledger.states import SQL, EventStatus, TransitionKind, TransitionResult, transition
from payflow.metrics import POSTINGS
from payflow.money import format_amount, negate
from payflow.outbox.writer import release_held_job
from payflow.retry import RetryPolicy, RetryStats, retrying

log = structlog.get_logger("payflow.ledger")

if TYPE_CHECKING:
    from payflow.ledger.together import PostingCoalescer

OutcomeHook = Callable[[Connection, PostingResult], Awaitable[None]]

# The one-statement success path's signal that it wrote nothing and the full path decides.
_FULL_PATH = "PF001"
# Statuses the success path confirms from: the state machine's sources of `confirmed`, and
# `pending`, which `_move` walks through `enqueued` (the relay may not have marked it yet).
_SUCCESS_SOURCES = sorted({*states.sources_of(EventStatus.CONFIRMED), EventStatus.PENDING.value})
_CREDIT_TYPES = sorted(t.value for t in EventType if t.is_credit)
_ACTIVE_TYPES = sorted(t.value for t in EventType if t.requires_active)


def posting_key(event_id: str) -> str:
    """The idempotency key under which posting `event_id` is recorded."""
    return idempotency_key("ledger.post", event_id)


def success_path_args(event_id: str) -> tuple[str, list[str], list[str], list[str]]:
    """What `ledger_post_success` (migration 0020) is called with for `event_id`, besides
    the lock timeout: (posting key, statuses it confirms from, credit types, types a
    frozen account refuses). Shared by `post_in_one_statement` and the payment finalize
    that posts its credit in its own commit (`payment_finalize`, migration 0022), so the
    success path has one definition of its arguments."""
    return posting_key(event_id), _SUCCESS_SOURCES, _CREDIT_TYPES, _ACTIVE_TYPES


class _DebitRefused(Exception):
    """Internal: the optimistic debit found no funds (or a frozen account); roll back."""


async def post_event(
    pool: asyncpg.Pool,
    settings: DatabaseSettings,
    event_id: str,
    *,
    on_refusal: OutcomeHook | None = None,
    policy: RetryPolicy | None = None,
    stats: RetryStats | None = None,
    together: PostingCoalescer | None = None,
) -> PostingResult:
    """Apply `event_id` to its account exactly once, retrying only transient failures.

    `together`: the process's `PostingCoalescer` (`payflow.ledger.together`), which sends
    the success path with the other postings in flight in one commit; None: alone.

    Invariant: however many times and however concurrently this is called for one
    event, at most one ledger row and one balance change exist for it, and the
    event's status, its recorded outcome and the balance commit together.
    `on_refusal` runs inside the posting transaction when a fresh outcome is not a
    success (insufficient funds, a frozen account, an overflow); never for a replay.
    Raises `AlreadyProcessed` (final without a posting record), `RetryableError` once the
    policy's attempts are spent, `NotFound` for an unknown event.
    """
    policy = (
        policy if policy is not None else RetryPolicy(max_attempts=settings.posting_max_attempts)
    )

    async def attempt() -> PostingResult:
        try:
            if together is not None:  # the success path, sent with the process's others
                fast = await together.post(event_id)
                if fast is not None:
                    return fast
            async with pool.acquire() as conn:
                if together is None:
                    fast = await post_in_one_statement(conn, settings, event_id)
                    if fast is not None:
                        return fast
                try:
                    async with transaction(conn, settings):
                        return await _post_optimistic(conn, event_id)
                except _DebitRefused:
                    async with transaction(conn, settings):
                        return await _post_pessimistic(conn, event_id, on_refusal)
        except asyncpg.NumericValueOutOfRangeError:
            async with pool.acquire() as conn, transaction(conn, settings):
                result = await _post_overflow(conn, event_id, on_refusal)
            if not result.replayed:  # the alert, once the outcome is committed
                log.error("payflow.ledger.overflow", event_id=event_id, detail=result.detail)
            return result

    result = await retrying(attempt, policy, stats)
    POSTINGS.labels("replayed" if result.replayed else result.outcome.value).inc()  # committed
    return result


async def post_within(
    conn: Connection, event_id: str, *, consumes_hold: bool = False
) -> PostingResult:
    """Post `event_id` exactly once inside the CALLER's transaction (the same claim,
    transition, outcome and guarded balance change as `post_event`).

    For postings that must commit together with other writes (a payout's debit, its
    `withdrawal_fee` and the release of its hold). A replay returns the recorded outcome.
    `consumes_hold`: the debit spends a hold the caller released in this transaction
    (a payout whose money already left on chain), so it applies to a frozen account too.
    Raises `InsufficientFunds` when a debit is refused: the caller's transaction must
    then roll back (nothing of this posting is kept).
    """
    try:
        return await _post_optimistic(conn, event_id, frozen_ok=consumes_hold)
    except _DebitRefused:
        raise InsufficientFunds(f"event {event_id!r}: the debit is refused") from None


async def post_in_one_statement(
    conn: Connection, settings: DatabaseSettings, event_id: str, *, held_job: int | None = None
) -> PostingResult | None:
    """The success path in one autocommitted statement (`ledger_post_success`): the
    committed success, or None when it wrote nothing and the full path must decide (a
    duplicate delivery, an event that cannot move to confirmed, a refused debit).
    `held_job`: the event's held-back `ledger.event` outbox row, deleted in the same
    commit as a success (see `post_held_credit`).
    `conn` must not be inside a transaction. Raises what the statement raises otherwise
    (`NumericValueOutOfRangeError` on an overflow, lock timeouts, connection loss)."""
    bounds = StatementBounds.of(settings)
    try:
        key, sources, credit_types, active_types = success_path_args(event_id)
        balance_after: Decimal | None = await conn.fetchval(
            SQL["post_success"],
            key,
            event_id,
            sources,
            credit_types,
            active_types,
            bounds.lock_timeout_ms,
            held_job,
            timeout=bounds.timeout_s,
        )
    except asyncpg.PostgresError as exc:
        if exc.sqlstate == _FULL_PATH:
            return None
        raise
    if balance_after is None:
        return None
    return PostingResult(event_id, Outcome.SUCCESS, replayed=False, balance_after=balance_after)


async def post_held_credit(
    pool: asyncpg.Pool, settings: DatabaseSettings, event_id: str, held_job: int
) -> PostingResult | None:
    """Post a credit at once, right after the commit that recorded it with a held-back
    `ledger.event` job (`outbox.next_attempt_at` in the future), and settle that job.

    Returns the committed success (the job is deleted in the same commit), or None when
    this shortcut did not post: then the job is made due now (best effort) and the ledger
    worker decides through `post_event`, the full path with its retries, refusal outcomes
    and dead-lettering. Never raises (a failure is logged): the job is the guarantee, and
    if even its release fails the relay publishes it when the hold ends.

    Invariant: the same exactly-once posting as `post_event` (one claim in
    `processed_events`, one ledger row), so the shortcut and the job can never both apply.
    """
    bounds = StatementBounds.of(settings)  # every statement here runs outside a transaction
    try:
        async with pool.acquire() as conn:
            result = await post_in_one_statement(conn, settings, event_id, held_job=held_job)
            if result is None:
                await release_held_job(conn, held_job, timeout_s=bounds.timeout_s)
    except Exception as exc:
        log.warning(
            "payflow.ledger.held_credit_deferred",
            event_id=event_id,
            error=f"{type(exc).__name__}: {exc}",
        )
        with contextlib.suppress(Exception):
            async with pool.acquire() as conn:
                await release_held_job(conn, held_job, timeout_s=bounds.timeout_s)
        return None
    if result is not None:
        POSTINGS.labels(result.outcome.value).inc()
    return result


async def _post_optimistic(
    conn: Connection, event_id: str, *, frozen_ok: bool = False
) -> PostingResult:
    """The full path's first try: claim, confirm, record success, then change the balance
    last (inside the caller's transaction)."""
    key = posting_key(event_id)
    if await conn.fetchval(SQL["claim_idempotency"], key, event_id) is None:
        return await _replay(conn, event_id, key)
    moved = await _move(conn, event_id, EventStatus.CONFIRMED)
    await conn.execute(SQL["record_outcome"], key, Outcome.SUCCESS.value)
    balance_after = await _apply(conn, moved, frozen_ok=frozen_ok)
    if balance_after is None:
        raise _DebitRefused
    return PostingResult(event_id, Outcome.SUCCESS, replayed=False, balance_after=balance_after)


async def _post_pessimistic(
    conn: Connection, event_id: str, on_refusal: OutcomeHook | None
) -> PostingResult:
    """After a refused debit: decide under the account lock, then record the outcome."""
    key = posting_key(event_id)
    if await conn.fetchval(SQL["claim_idempotency"], key, event_id) is None:
        return await _replay(conn, event_id, key)
    moved = await _move(conn, event_id, EventStatus.PROCESSING)
    balance_after = await _apply(conn, moved)
    if balance_after is not None:
        await _move(conn, event_id, EventStatus.CONFIRMED)
        outcome = Outcome.SUCCESS
    else:
        refusal = await conn.fetchrow(SQL["account_debit_refusal"], moved["account_id"])
        assert refusal is not None  # the event's foreign key guarantees the account
        outcome = (
            Outcome.ACCOUNT_FROZEN
            if refusal["status"] == "frozen"
            else (Outcome.INSUFFICIENT_FUNDS)
        )
        await _move(conn, event_id, EventStatus.FAILED)
    await conn.execute(SQL["record_outcome"], key, outcome.value)
    result = PostingResult(event_id, outcome, replayed=False, balance_after=balance_after)
    if on_refusal is not None and outcome is not Outcome.SUCCESS:
        await on_refusal(conn, result)
    return result


async def _post_overflow(
    conn: Connection, event_id: str, on_refusal: OutcomeHook | None
) -> PostingResult:
    """After a balance overflow rolled back: fail the event with `last_error` and record
    `amount_overflow` (the caller logs the alert `payflow.ledger.overflow` after commit).

    Runs in its own transaction; the claim serialises it with any concurrent delivery,
    so the outcome is recorded once and later deliveries replay it.
    """
    key = posting_key(event_id)
    if await conn.fetchval(SQL["claim_idempotency"], key, event_id) is None:
        return await _replay(conn, event_id, key)
    moved = await _move(conn, event_id, EventStatus.FAILED)
    detail = (
        f"amount_overflow: the balance of account {moved['account_id']} cannot hold "
        f"{moved['event_type']} {format_amount(moved['amount'])} (numeric_value_out_of_range)"
    )
    await conn.execute(SQL["set_event_error"], event_id, detail)
    await conn.execute(SQL["record_outcome"], key, Outcome.AMOUNT_OVERFLOW.value)
    result = PostingResult(event_id, Outcome.AMOUNT_OVERFLOW, replayed=False, detail=detail)
    if on_refusal is not None:
        await on_refusal(conn, result)
    return result


async def _apply(
    conn: Connection, event: asyncpg.Record, *, frozen_ok: bool = False
) -> Decimal | None:
    """Change the balance and append the ledger row in one statement; None if refused."""
    event_type = EventType(event["event_type"])
    amount: Decimal = event["amount"]
    delta = amount if event_type.is_credit else negate(amount)
    balance_after: Decimal | None = await conn.fetchval(
        SQL["apply_balance_change"],
        event["account_id"],
        delta,
        event_type.value,
        event["event_id"],
        event_type.requires_active and not frozen_ok,
    )
    return balance_after


async def _move(conn: Connection, event_id: str, target: EventStatus) -> asyncpg.Record:
    """Walk the event to `target` (through enqueued when it is still pending)."""
    result = await transition(conn, event_id, target)
    if result.kind is TransitionKind.INVALID and result.status is EventStatus.PENDING:
        step = await transition(conn, event_id, EventStatus.ENQUEUED)
        # The relay may have moved it to enqueued between our two reads: that is fine.
        if step.kind is not TransitionKind.ALREADY_IN_TARGET:
            await _require_changed(step, event_id)
        result = await transition(conn, event_id, target)
    return await _require_changed(result, event_id)


async def _require_changed(result: TransitionResult, event_id: str) -> asyncpg.Record:
    if result.changed and result.row is not None:
        return result.row
    if result.kind in (TransitionKind.ALREADY_TERMINAL, TransitionKind.ALREADY_IN_TARGET):
        # Finalised without a posting record (for example failed by recovery): never post.
        raise AlreadyProcessed(f"event {event_id!r} is already {result.status}")
    if result.kind is TransitionKind.CONCURRENT_CHANGE:
        raise RetryableError(f"event {event_id!r} changed concurrently (now {result.status})")
    raise DatabaseError(f"event {event_id!r} cannot move from {result.status}")


async def _replay(conn: Connection, event_id: str, key: str) -> PostingResult:
    """An earlier delivery already posted: return its outcome and repair a lagging status."""
    recorded = await conn.fetchval(SQL["recorded_outcome"], key)
    if recorded is None:
        raise NotFound(f"no recorded outcome for event {event_id!r}")
    outcome = Outcome(recorded)
    if outcome is Outcome.PENDING:
        raise DatabaseError(f"event {event_id!r} has a committed claim without an outcome")
    target = EventStatus.CONFIRMED if outcome is Outcome.SUCCESS else EventStatus.FAILED
    result = await transition(conn, event_id, target)
    if result.kind is TransitionKind.INVALID and result.status is EventStatus.PENDING:
        await transition(conn, event_id, EventStatus.ENQUEUED)
        await transition(conn, event_id, target)
    return PostingResult(event_id, outcome, replayed=True)
