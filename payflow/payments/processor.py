"""The payment worker: claim -> gateway -> answer + succeeded|failed, credit, webhook job.

A gateway charge is an effect outside PostgreSQL, so it is claimed before it happens and
its answer is recorded before anything depends on it (`payflow.payments.charges`):

* step 1 commits a charge attempt with a lease (for a payment's first attempt one
  statement, `claim_first_charge`, that also reads the payment; a concurrent delivery
  of the same payment sees the live claim and retries later; it never calls the
  gateway meanwhile);
* the gateway is called with no transaction open (a redelivery whose predecessor left
  an unanswered attempt asks `status()` first and charges only if the gateway never
  saw the payment);
* step 2 records the answer and finalizes (one statement normally, `finalize_answered`):
  the status moves by compare-and-set and the same commit writes the merchant's
  `payment_credit` event (``payment:<uuid>``), posts it through the ledger's one success
  path (migration 0022) and writes the `webhook.deliver` job;
* when that statement cannot post (a refused or contended balance change), the
  transactional finalize writes the credit with its `ledger.event` job held back from
  the relay as the guarantee (`CREDIT_HOLD_S`), and this worker posts it at once
  (`post_held_credit`); the ledger worker posts it instead when this worker could not.
  A merchant's first success in a currency (its account is opened in that transaction)
  writes the job due now, and the ledger worker posts it.

So whatever crashes where, the payment is either untouched (and the gateway knows
whether it charged) or final with its credit and webhook job, and the credit is posted
exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from typing import Any
from uuid import UUID, uuid4

import asyncpg
import structlog

from payflow.broker.messages import Envelope, payment_id_of
from payflow.config import DatabaseSettings, PipelineSettings
from payflow.db.queries import load_queries
from payflow.db.tx import StatementBounds, transaction
from payflow.dlq.fallback import DlqFallback
from payflow.errors import (
    BadInput,
    NotFound,
    PayflowError,
)
from payflow.ledger.posting import post_held_credit
from payflow.metrics import POSTINGS
from payflow.observability import bind_stored_trace
from payflow.payments.charges import (
    OPEN_STATES,
    Claim,
    claim_charge,
    claim_first_charge,
    latest_attempt,
    lock_payment,
    record_answer,
    release_claim,
)
from payflow.payments.coalesce import FinalizeCoalescer
from payflow.payments.dead_letters import dead_letter_payment, status_of
from payflow.payments.finalize import (
    Answered,
    finalize,
    finalize_answered,
    finalize_payment,
)
from payflow.payments.gateway import ChargeRequest, ChargeResult, Gateway
from payflow.payments.records import load_payment
from payflow.webhooks.direct import DirectSends
from payflow.webhooks.endpoints.direct import EndpointDirectSends

SQL = load_queries("payflow.payments")
log = structlog.get_logger("payflow.payments")


class PaymentProcessor:
    """Handles `payment.created` messages (and their dead-lettering)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: PipelineSettings,
        gateway: Gateway,
        fallback: DlqFallback | None = None,
        direct: DirectSends | None = None,
        *,
        database: DatabaseSettings,
        endpoint_direct: EndpointDirectSends | None = None,
    ) -> None:
        """`direct`: the process's direct webhook sends (`payflow.webhooks.direct`); None:
        every webhook job goes through the queue. `endpoint_direct`: its direct sends of
        the payment's event to the merchant's endpoints
        (`payflow.webhooks.endpoints.direct`); None: every delivery goes through the queue."""
        self._pool = pool
        self._direct = direct
        self._endpoint_direct = endpoint_direct
        self._fallback = fallback if fallback is not None else DlqFallback.disabled()
        self._settings = settings
        self._database = database
        # The hot path's one-statement steps run outside a transaction, bounded as a whole.
        self._bounds = StatementBounds.of(database)
        # Answers of one merchant's settlement account finalized together (group commit).
        self._together = FinalizeCoalescer(
            pool, credit_hold_s=settings.credit_hold_s, bounds=self._bounds
        )
        self._gateway = gateway
        self._worker = f"{socket.gethostname()}:{os.getpid()}"
        # Gateway calls in flight per process, independent of the DB pool (a call holds
        # no connection) and of other queues' prefetch.
        self._charging = asyncio.Semaphore(settings.gateway_max_in_flight)

    async def handle(self, envelope: Envelope) -> None:
        """Process one payment; a duplicate delivery of a final payment does nothing.

        Raises `ChargeInProgress` (retryable) while another delivery holds a live claim,
        and the gateway's `RetryableError` after releasing this delivery's claim.

        Invariant: the gateway is called only under a committed, live claim; the answer,
        the payment's status, its credit event and its webhook job commit together, once.
        """
        payment_id = payment_id_of(envelope)
        structlog.contextvars.bind_contextvars(payment_id=str(payment_id))
        trace_id = envelope.trace_id or None
        # The slot is taken before the claim, so a claim's lease never runs out while
        # it waits for one.
        async with self._charging:
            token = f"{self._worker}:{uuid4().hex[:12]}"
            lease_s = self._settings.charge_lease_s
            async with self._pool.acquire() as conn:
                # The payment and, in the common case, its first claim: one statement.
                payment, first = await claim_first_charge(
                    conn, payment_id, token, lease_s, self._bounds
                )
            bind_stored_trace(payment["trace_id"])
            if payment["status"] != "pending":
                log.info("payflow.payments.duplicate", status=payment["status"])
                return
            await self._charge(payment, first, token, trace_id)

    async def _charge(
        self, payment: asyncpg.Record, first: Claim | None, token: str, trace_id: str | None
    ) -> None:
        """Claim (unless `first` is the claim already taken), call the gateway with no
        transaction open, record and finalize."""
        payment_id: UUID = payment["id"]
        changed = False
        lease_s = self._settings.charge_lease_s
        claim: Claim | ChargeResult | None = first
        if claim is None:  # a redelivery or a race: the full claim decides
            async with self._pool.acquire() as conn, transaction(conn, self._database):
                claim = await claim_charge(conn, payment_id, token, lease_s)
                if isinstance(claim, ChargeResult):  # answered: finalize from the record
                    changed = await finalize(conn, payment, status_of(claim), trace_id)
        if claim is None:
            log.info("payflow.payments.duplicate", status="final")
            return
        if isinstance(claim, ChargeResult):
            log.info(
                "payflow.payments.finalized" if changed else "payflow.payments.duplicate",
                status=status_of(claim),
                source="recorded answer",
            )
            return
        result = await self._call_gateway(claim, payment)
        hold_s = self._settings.credit_hold_s
        answer = result
        # A send slot free now: the finalize takes the webhook's lease for our own send.
        direct = self._direct
        reservation = direct.reserve() if direct and payment["webhook_url"] else None
        lease = None if reservation is None else (reservation.token, reservation.lease_s)
        # Likewise for the event's deliveries to the merchant's endpoints.
        fan_out = self._endpoint_direct
        sends = fan_out.reserve() if fan_out else None
        sends_lease = None if sends is None else (sends.token, sends.lease_s)
        # One statement normally (with the account's other answers when it posts); anything
        # it does not decide takes the transaction. A raise leaves a lease taken anyway to
        # run out, its held jobs standing behind it.
        if hold_s > 0:  # the credit is posted in the finalize's commit
            done = await self._together.finalize(
                Answered(payment, result, trace_id, lease, sends_lease)
            )
        else:  # 0: the ledger worker posts every credit
            async with self._pool.acquire() as conn:
                done = await finalize_answered(
                    conn,
                    payment,
                    result,
                    trace_id,
                    bounds=self._bounds,
                    webhook_lease=lease,
                    endpoint_lease=sends_lease,
                )
        if not done.changed:
            async with self._pool.acquire() as conn, transaction(conn, self._database):
                await lock_payment(conn, payment_id)
                answer = await record_answer(conn, payment_id, result)
                done = await finalize_payment(
                    conn, payment, status_of(answer), trace_id, credit_hold_s=hold_s
                )
        changed = done.changed
        if done.posted is not None:  # committed with the finalize
            POSTINGS.labels("success").inc()
        try:
            if done.held_credit is not None:  # committed: post it now, its job stands behind
                await post_held_credit(self._pool, self._database, *done.held_credit)
        finally:
            if direct and reservation and done.held_webhook is not None:
                # committed: send it now (after the credit), its held job behind it
                final = {**dict(payment), "status": status_of(result)}
                final["trace_id"] = payment["trace_id"] or trace_id
                direct.start(reservation, final, done.held_webhook)
            if fan_out and sends and done.held_deliveries:
                # committed: send them now, their held jobs behind them
                fan_out.start(sends, done.held_deliveries)
        if answer != result:
            log.error(
                "payflow.payments.answer_mismatch",
                recorded=status_of(answer),
                received=status_of(result),
                reference=result.reference,
            )
        log.info(
            "payflow.payments.finalized" if changed else "payflow.payments.duplicate",
            status=status_of(answer),
            reason=answer.reason,
            attempt=claim.attempt,
        )

    async def _call_gateway(self, claim: Claim, payment: asyncpg.Record) -> ChargeResult:
        """Ask (recovering claims) or charge, with no transaction open, within the lease.

        On any failure the claim's lease ends at once so the next delivery takes over
        and asks the gateway what happened."""
        log.info("payflow.payments.charging", attempt=claim.attempt, recovering=claim.recovering)
        try:
            async with asyncio.timeout(self._settings.charge_lease_s):
                if claim.recovering:
                    known = await self._gateway.status(payment["id"])
                    if known is not None:
                        log.info("payflow.payments.recovered", approved=known.approved)
                        return known
                return await self._gateway.charge(
                    ChargeRequest(payment["id"], payment["amount"], payment["currency"])
                )
        except Exception:
            with contextlib.suppress(Exception):  # best effort: the lease expires anyway
                async with self._pool.acquire() as conn, transaction(conn, self._database):
                    await release_claim(conn, claim)
            raise

    async def _ask_status(self, payment_id: UUID) -> tuple[ChargeResult | None, str]:
        """One `status()` question for `on_dead`: the answer (None: not known) and a note."""
        try:
            async with asyncio.timeout(self._settings.charge_lease_s):
                known = await self._gateway.status(payment_id)
        except Exception as exc:
            return None, f"gateway unreachable: {type(exc).__name__}: {exc}"
        if known is None:
            return None, "the gateway has no charge for this payment"
        return known, "the gateway answered"

    async def on_dead(self, envelope: Envelope, error: PayflowError) -> None:
        """Retries exhausted: settle what is known and record the DLQ row, in one
        transaction (`dead_letter_payment`); with PostgreSQL unreachable, park the dead
        letter in Redis (`DlqFallback`; the drain runs `dead_letter_payment` later).

        Invariant: a payment is marked failed only when the gateway's answer is known
        (a recorded or freshly asked decline) or the gateway was never asked (no charge
        attempt). A claimed, unanswered attempt gets one `status()` question, outside
        any transaction: a known answer finalizes the payment; anything else leaves it
        pending with its attempt `needs_review` (alert `payflow.payments.needs_review`).
        """
        payload: dict[str, Any] = dict(envelope.payload)
        text = f"{type(error).__name__}: {error}"

        async def write() -> None:
            payment: asyncpg.Record | None = None
            known: ChargeResult | None = None
            note = ""
            try:
                async with self._pool.acquire() as conn:
                    payment = await load_payment(conn, payment_id_of(envelope))
                    pending = payment["status"] == "pending"
                    seen = await latest_attempt(conn, payment["id"]) if pending else None
            except (BadInput, NotFound):
                payment = None
            else:
                if seen is not None and seen.state in OPEN_STATES:
                    known, note = await self._ask_status(payment["id"])
            async with self._pool.acquire() as conn, transaction(conn, self._database):
                await dead_letter_payment(
                    conn,
                    payload,
                    text,
                    envelope.attempt,
                    known=known,
                    note=note,
                    trace_id=envelope.trace_id or None,
                )

        await self._fallback.record_for(
            write, envelope, source="payment", subject_key="payment_id", error=text
        )
