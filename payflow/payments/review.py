"""Operator tools for charges whose outcome payflow could not learn (`needs_review`).

A payment whose charge attempt is `needs_review` stays pending: the customer may or may
not have been charged. The normal remedy is `payflow dlq replay ID` (or a sweep's
re-announcement) once the gateway answers again: the worker takes the attempt over and
asks the gateway's `status()`. When the gateway cannot tell (its records are lost, or
the charge was settled outside payflow), an operator who has checked the gateway's own
dashboard records the answer with `resolve_charge` (`payflow payments resolve`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from uuid import UUID

import asyncpg
import structlog

from payflow.config import DatabaseSettings
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.errors import Conflict
from payflow.payments.charges import AttemptState, latest_attempt, lock_payment, record_answer
from payflow.payments.finalize import FAILED, SUCCEEDED, finalize
from payflow.payments.gateway import ChargeResult
from payflow.payments.records import load_payment

SQL = load_queries("payflow.payments")
log = structlog.get_logger("payflow.payments")


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """One charge waiting for an operator."""

    payment_id: UUID
    attempt: int
    claimed_at: datetime
    reason: str
    amount: Decimal
    currency: str
    merchant_id: UUID


async def list_needs_review(pool: asyncpg.Pool, limit: int = 100) -> list[ReviewItem]:
    """Charges parked as `needs_review`, oldest first (at most `limit`)."""
    rows = await pool.fetch(SQL["charges_needing_review"], limit)
    return [ReviewItem(**dict(row)) for row in rows]


async def resolve_charge(
    pool: asyncpg.Pool,
    settings: DatabaseSettings,
    payment_id: UUID,
    *,
    approved: bool,
    reference: str,
    operator: str,
) -> str:
    """Record the gateway's answer as an operator read it, and finalize the payment.

    In one transaction under the payment's row lock: the open attempt (`needs_review`,
    or `claimed` with an expired lease) gets the answer with reason
    ``resolved by <operator>``, and the payment moves to succeeded (credit and webhook
    jobs) or failed, and the payment's open dead letters are resolved with it. Returns a
    one-line resolution. Raises `NotFound` for an unknown
    payment and `Conflict` when there is nothing to resolve (already final, no attempt,
    or a worker holds a live claim).
    """
    async with pool.acquire() as conn, transaction(conn, settings):
        payment = await load_payment(conn, payment_id)
        if await lock_payment(conn, payment_id) != "pending":
            raise Conflict(f"payment {payment_id} is already {payment['status']}")
        latest = await latest_attempt(conn, payment_id)
        if latest is None or latest.state not in (AttemptState.NEEDS_REVIEW, AttemptState.CLAIMED):
            raise Conflict(f"payment {payment_id} has no unanswered charge attempt")
        if latest.state is AttemptState.CLAIMED and not latest.expired:
            raise Conflict(f"a worker holds a live claim on payment {payment_id}; retry later")
        answer = ChargeResult(
            approved=approved, reason=f"resolved by {operator}", reference=reference
        )
        await record_answer(conn, payment_id, answer)
        status = SUCCEEDED if approved else FAILED
        await finalize(conn, payment, status, payment["trace_id"])
        # Its dead letters are answered with it: left open, they would keep `payflow
        # status` failing until each was replayed to no effect.
        resolved = await conn.fetch(
            SQL["resolve_payment_dead_letters"],
            str(payment_id),
            operator,
            f"the payment was resolved by its operator: {status}",
        )
    log.warning(
        "payflow.payments.resolved_by_operator",
        payment_id=str(payment_id),
        trace_id=payment["trace_id"],
        status=status,
        operator=operator,
        reference=reference,
    )
    letters = f"; {len(resolved)} dead letter(s) resolved with it" if resolved else ""
    return f"resolved: payment {status} (attempt {latest.attempt}, by {operator}){letters}"


async def print_review(settings: DatabaseSettings, limit: int) -> None:
    """`payflow payments review`: print the charges waiting for an operator."""
    from rich.console import Console
    from rich.table import Table

    from payflow.db.pool import tool_pool

    async with tool_pool(settings) as pool:
        items = await list_needs_review(pool, limit)
    table = Table(title=f"charges needing review ({len(items)})")
    for column in ("payment", "attempt", "amount", "merchant", "claimed", "reason"):
        table.add_column(column)
    for item in items:
        table.add_row(
            str(item.payment_id),
            str(item.attempt),
            f"{format(item.amount.normalize(), 'f')} {item.currency}",
            str(item.merchant_id),
            item.claimed_at.isoformat(timespec="seconds"),
            item.reason[:80],
        )
    Console(markup=False, highlight=False).print(table)


async def resolve_cli(
    settings: DatabaseSettings, payment_id: UUID, *, approved: bool, reference: str, operator: str
) -> str:
    """`payflow payments resolve`: `resolve_charge` on a tool pool."""
    from payflow.db.pool import tool_pool

    async with tool_pool(settings) as pool:
        return await resolve_charge(
            pool,
            settings,
            payment_id,
            approved=approved,
            reference=reference,
            operator=operator,
        )
