"""Charge attempts: a gateway charge is claimed in the database before it happens, and
its answer is recorded before anything depends on it.

The protocol (docs/pipeline.md, "The charge-claim protocol"), per payment:

1. tx 1 (`claim_first_charge`, one autocommitted statement for a payment's first
   attempt, else `claim_charge`): under the payment's row lock, commit a `claimed` attempt
   with a lease of `CHARGE_LEASE_S`. A live claim held by another delivery makes this one retry
   later (`ChargeInProgress`); an unanswered attempt whose lease expired (its worker died
   or gave up) is superseded by a new one that *recovers*: it asks the gateway's
   `status()` before it would ever charge.
2. The gateway call, with no transaction open.
3. tx 2 (`record_answer` + `finalize`): the answer and the payment's final status commit
   together.

Every function here but `claim_first_charge` runs inside the caller's transaction and
never commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from uuid import UUID

import asyncpg

from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.db.tx import StatementBounds
from payflow.errors import NotFound, RetryableError
from payflow.payments.gateway import ChargeResult

SQL = load_queries("payflow.payments")

PENDING = "pending"


class AttemptState(StrEnum):
    """Mirrors the CHECK `charge_attempts_state_valid`."""

    CLAIMED = "claimed"
    APPROVED = "approved"
    DECLINED = "declined"
    SUPERSEDED = "superseded"
    NEEDS_REVIEW = "needs_review"


OPEN_STATES = frozenset({AttemptState.CLAIMED, AttemptState.NEEDS_REVIEW})
ANSWERED_STATES = frozenset({AttemptState.APPROVED, AttemptState.DECLINED})


class ChargeInProgress(RetryableError):
    """Another delivery holds a live claim on this payment's charge; try again later."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A committed claim: this delivery may call the gateway for the payment.

    `recovering` is true when an earlier attempt went unanswered: ask `status()` first
    and charge only when the gateway never saw the payment.
    """

    attempt_id: UUID
    attempt: int
    token: str
    recovering: bool


@dataclass(frozen=True, slots=True)
class Attempt:
    """A payment's newest charge attempt, as stored."""

    attempt_id: UUID
    attempt: int
    state: AttemptState
    claimed_by: str
    expired: bool
    reason: str
    reference: str

    @property
    def answer(self) -> ChargeResult | None:
        """The recorded gateway answer, when there is one."""
        if self.state not in ANSWERED_STATES:
            return None
        return ChargeResult(
            approved=self.state is AttemptState.APPROVED,
            reason=self.reason,
            reference=self.reference,
        )


def _require_transaction(conn: Connection, what: str) -> None:
    if not conn.is_in_transaction():
        raise RuntimeError(f"{what} must run inside the caller's transaction")


async def lock_payment(conn: Connection, payment_id: UUID) -> str | None:
    """Lock the payment row for this transaction; its status, or None when absent."""
    _require_transaction(conn, "lock_payment")
    status: str | None = await conn.fetchval(SQL["lock_payment_for_charge"], payment_id)
    return status


async def latest_attempt(conn: Connection, payment_id: UUID) -> Attempt | None:
    """The payment's newest attempt (the only one that can be open or answered)."""
    row: asyncpg.Record | None = await conn.fetchrow(SQL["latest_charge_attempt"], payment_id)
    if row is None:
        return None
    return Attempt(
        attempt_id=row["attempt_id"],
        attempt=row["attempt"],
        state=AttemptState(row["state"]),
        claimed_by=row["claimed_by"],
        expired=row["expired"],
        reason=row["reason"],
        reference=row["gateway_reference"],
    )


async def claim_first_charge(
    conn: Connection, payment_id: UUID, token: str, lease_s: float, bounds: StatementBounds
) -> tuple[asyncpg.Record, Claim | None]:
    """The worker's first read of a payment and its common claim, in one autocommitted
    statement: `(payment, claim)`. `payment` has the columns of `load_payment` (and the
    claim's `attempt_id`, NULL without one); `claim`
    is attempt 1 of a pending payment that never had one, with a lease of `lease_s`
    seconds named `token`, or None when `claim_charge` must decide (not pending, an
    earlier attempt, a concurrent claim); nothing is written then. Raises `NotFound` for
    an unknown payment. `conn` must not be inside a transaction, so the payment's row
    lock is held only while the server runs the statement, which `bounds` limits
    (`TimeoutError` or 55P03, both retryable; see `StatementBounds`).

    Invariant: the same as `claim_charge` (one open attempt per payment, taken under the
    payment's row lock); a recovering claim is never made here.
    """
    if conn.is_in_transaction():
        raise RuntimeError("claim_first_charge runs outside a transaction (it commits)")
    row = await conn.fetchrow(
        SQL["claim_first_charge"],
        payment_id,
        token,
        lease_s,
        bounds.lock_timeout_ms,
        timeout=bounds.timeout_s,
    )
    if row is None:
        raise NotFound(f"payment {payment_id} does not exist")
    attempt_id: UUID | None = row["attempt_id"]
    if attempt_id is None:
        return row, None
    return row, Claim(attempt_id=attempt_id, attempt=1, token=token, recovering=False)


async def claim_charge(
    conn: Connection, payment_id: UUID, token: str, lease_s: float
) -> Claim | ChargeResult | None:
    """Claim the payment's gateway charge for the delivery identified by `token`.

    Returns None when the payment is not pending (a duplicate delivery: nothing to do),
    the recorded `ChargeResult` when an answer is already stored (finalize from it, no
    gateway call), or a `Claim` to act on. Raises `ChargeInProgress` (retryable) while
    another delivery's claim is live.

    Invariant: race-free under concurrent deliveries. The payment row lock serialises
    claims, and `charge_attempts_one_open` refuses a second open attempt, so at most one
    delivery at a time holds a live claim and may call the gateway.
    """
    _require_transaction(conn, "claim_charge")
    if await lock_payment(conn, payment_id) != PENDING:
        return None
    latest = await latest_attempt(conn, payment_id)
    recovering = False
    number = 1
    if latest is not None:
        if latest.answer is not None:
            return latest.answer
        number = latest.attempt + 1
        if latest.state is AttemptState.CLAIMED and not latest.expired:
            raise ChargeInProgress(
                f"charge attempt {latest.attempt} of payment {payment_id} is in progress"
            )
        if latest.state in OPEN_STATES:
            await conn.fetchval(SQL["supersede_charge_attempt"], latest.attempt_id)
        recovering = True  # an earlier attempt may have reached the gateway
    attempt_id: UUID = await conn.fetchval(
        SQL["insert_charge_attempt"], payment_id, number, token, lease_s
    )
    return Claim(attempt_id=attempt_id, attempt=number, token=token, recovering=recovering)


async def release_claim(conn: Connection, claim: Claim) -> None:
    """End `claim`'s lease now (its gateway call failed), so the next delivery takes the
    attempt over at once and asks the gateway what happened. A no-op when the attempt
    was already answered or superseded."""
    await conn.execute(SQL["release_charge_claim"], claim.attempt_id, claim.token)


async def record_answer(conn: Connection, payment_id: UUID, result: ChargeResult) -> ChargeResult:
    """Record the gateway's answer on the payment's open attempt; return the answer that
    stands (the first one recorded wins, so a later, different answer is not stored).

    Run under `lock_payment` in the transaction that finalizes the payment. Raises
    `RuntimeError` when the payment has no attempt at all (claim first).
    """
    _require_transaction(conn, "record_answer")
    state = AttemptState.APPROVED if result.approved else AttemptState.DECLINED
    recorded = await conn.fetchval(
        SQL["record_charge_answer"], payment_id, state.value, result.reason, result.reference
    )
    if recorded is not None:
        return result
    latest = await latest_attempt(conn, payment_id)
    if latest is None or latest.answer is None:
        raise RuntimeError(f"payment {payment_id} has no open or answered charge attempt")
    return latest.answer


async def mark_needs_review(conn: Connection, payment_id: UUID, reason: str) -> int | None:
    """Park the payment's open attempt for an operator; its attempt number, or None when
    no attempt is open. The payment stays pending."""
    _require_transaction(conn, "mark_needs_review")
    row = await conn.fetchrow(SQL["mark_charge_needs_review"], payment_id, reason)
    return None if row is None else int(row["attempt"])
