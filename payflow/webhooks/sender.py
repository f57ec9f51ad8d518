"""Merchant webhook delivery, signed per Standard Webhooks.

The handler does nothing only when the payment is terminal AND its webhook is
delivered (or dead-lettered). Checking the status alone would be wrong: a message back
from a retry tier after a failed POST finds the payment already final, and must still send.

A send never holds the database while it waits for a merchant:

1. claim, one short transaction (a job's first send: one autocommitted statement): under
   the payment's row lock, check what is left to do, that this message's chain may drive
   the job (`payflow.webhooks.chains`), and take the webhook's lease
   (`webhook_lease_token`, `webhook_lease_until` = now + `WEBHOOK_LEASE_S`); a duplicate
   (a live lease of another send, another live chain, a stale copy) is acked and
   dropped: the owner of the job decides it;
2. POST with no transaction open and no pooled connection held, bounded as a whole by
   `WEBHOOK_TIMEOUT_S` (below the lease, so two sends of one job never overlap);
3. record, one autocommitted statement: count the attempt, append the attempt log row,
   set `webhook_delivered_at` on a 2xx, end the lease, and note when the chain's retry
   is due back from its tier.

At most `WEBHOOK_MAX_IN_FLIGHT` sends run per process. A crash between POST and record
leaves the lease to expire; its redelivery is a duplicate of the in-flight job and is
dropped, and the webhook sweep re-announces the job once it is overdue; the next send
POSTs again with the same `webhook-id`, which the receiver dedupes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Mapping
from typing import Any
from uuid import UUID, uuid4

import asyncpg
import orjson
import structlog

from payflow.broker.messages import Envelope, payment_id_of
from payflow.config import BrokerSettings, DatabaseSettings, PipelineSettings, WebhookSettings
from payflow.db.queries import load_queries
from payflow.db.tx import StatementBounds, transaction
from payflow.dlq.fallback import DlqFallback
from payflow.errors import (
    NotFound,
    PayflowError,
    RetryableError,
    WebhookHTTPStatus,
    WebhookSendCancelled,
    WebhookTransportError,
)
from payflow.metrics import WEBHOOK_ATTEMPTS
from payflow.money import format_at_scale
from payflow.observability import bind_stored_trace, outbound_traceparent
from payflow.webhooks.attempts import attempt_outcome
from payflow.webhooks.chains import dead_letter_webhook, duplicate_reason, resolve_delivered_late
from payflow.webhooks.client import WebhookClient, build_http_client
from payflow.webhooks.signing import signature_headers
from payflow.webhooks.ssrf import UnsafeWebhookUrl, resolve_webhook_url
from payflow.webhooks.tiers import retry_after_s

SQL = load_queries("payflow.webhooks")
log = structlog.get_logger("payflow.webhooks")

# A payment's columns as a claim read them (`lock_payment_for_webhook`), or a mapping of
# the same keys (a direct send's finalized payment).
PaymentRow = asyncpg.Record | Mapping[str, Any]

__all__ = ["WebhookSender", "build_http_client", "dead_letter_webhook", "webhook_id"]


def webhook_id(payment_id: UUID) -> str:
    """Stable across every retry and replay of one payment's notification."""
    return f"msg_{payment_id.hex}"


def webhook_body(payment: PaymentRow) -> bytes:
    """`{payment_id, status, amount, currency}`, the amount as a string at the asset scale.

    The amount is rendered by `money.format_at_scale` (exact, context-free), so every
    stored amount renders; Python's 28-digit default context is never involved.
    """
    return orjson.dumps(
        {
            "payment_id": str(payment["id"]),
            "status": payment["status"],
            "amount": format_at_scale(payment["amount"], int(payment["scale"])),
            "currency": payment["currency"],
        }
    )


class WebhookSender:
    """Handles `webhook.deliver` messages."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: WebhookSettings,
        client: WebhookClient,
        fallback: DlqFallback | None = None,
        *,
        database: DatabaseSettings,
        pipeline: PipelineSettings,
        broker: BrokerSettings,
    ) -> None:
        """`settings`: the webhooks slice; `database` bounds its statements, `pipeline` says
        when an overdue chain is taken over (`WEBHOOK_SWEEP_AFTER_S`), `broker` its retry
        tiers."""
        self._pool = pool
        self._fallback = fallback if fallback is not None else DlqFallback.disabled()
        self._settings = settings
        self._database = database
        self._pipeline = pipeline
        self._broker = broker
        # Each one-statement step runs outside a transaction, bounded as a whole.
        self._bounds = StatementBounds.of(database)
        self._client = client
        self._worker = f"{socket.gethostname()}:{os.getpid()}"
        # Sends in flight per process; a send holds a pooled connection only for its two
        # short transactions, never while it waits for the merchant.
        self._sending = asyncio.Semaphore(settings.webhook_max_in_flight)

    @property
    def sending(self) -> asyncio.Semaphore:
        """The process's bound on sends in flight (`WEBHOOK_MAX_IN_FLIGHT`), shared by the
        chains' sends and the finalizing worker's own (`payflow.webhooks.direct`)."""
        return self._sending

    @property
    def worker(self) -> str:
        """This process's name in lease tokens (`host:pid`)."""
        return self._worker

    async def handle(self, envelope: Envelope) -> None:
        """Send the payment's signed notification unless it was already delivered, or
        drop the message when it is a duplicate (`payflow.webhooks.chains`).

        Raises the POST's failure (classified by `payflow.errors.classify`),
        `UnsafeWebhookUrl` for a refused URL, `NotFound` for an unknown payment, a
        retryable error while the payment is still pending. Never raises for a duplicate:
        it is acked, logged (`payflow.webhooks.duplicate_dropped`) and counted
        (`payflow_webhook_attempts_total{result="duplicate"}`).

        Invariant: `webhook_delivered_at` is set once, by the first 2xx recorded (even
        one recorded late, after a dead letter: it resolves the dead letter); every POST
        attempt is counted in `webhook_attempts`; a POST happens only under this send's
        lease, so two deliveries of one job never POST in parallel; one chain (a message
        id and its retries) drives the job at a time.
        """
        payment_id = payment_id_of(envelope)
        structlog.contextvars.bind_contextvars(payment_id=str(payment_id))
        async with self._sending:
            await self._send(payment_id, envelope.message_id, envelope.attempt)

    async def _claim(
        self, payment_id: UUID, token: str, message_id: str, attempt: int
    ) -> asyncpg.Record | None:
        """Step 1: the payment (with its merchant's secret) under a fresh lease named
        `token`, owned by this message's chain; None when nothing is left to send or the
        message is a duplicate. A job's first send claims in one autocommitted statement
        (`claim_fresh_webhook`); anything else takes the full claim below."""
        lease_s = self._settings.webhook_lease_s
        async with self._pool.acquire() as conn:
            fresh = await conn.fetchrow(
                SQL["claim_fresh_webhook"],
                payment_id,
                token,
                lease_s,
                message_id,
                attempt,
                self._bounds.lock_timeout_ms,
                timeout=self._bounds.timeout_s,
            )
        if fresh is not None:
            bind_stored_trace(fresh["trace_id"])
            return fresh
        async with self._pool.acquire() as conn, transaction(conn, self._database):
            payment = await conn.fetchrow(SQL["lock_payment_for_webhook"], payment_id)
            if payment is None:
                raise NotFound(f"payment {payment_id} does not exist")
            bind_stored_trace(payment["trace_id"])
            if payment["status"] == "pending":
                raise RetryableError("payment is not final yet")  # finalize makes this rare
            if payment["webhook_delivered_at"] is not None:
                log.info("payflow.webhooks.already_delivered")
                return None
            if payment["webhook_dead_at"] is not None:  # a DLQ replay clears it first
                log.info("payflow.webhooks.already_dead_lettered")
                return None
            if not payment["webhook_url"]:
                return None
            reason = duplicate_reason(
                payment, message_id, attempt, self._pipeline.webhook_sweep_after_s
            )
            if reason is not None:
                WEBHOOK_ATTEMPTS.labels("duplicate").inc()  # never POSTed
                log.info(
                    "payflow.webhooks.duplicate_dropped",
                    reason=reason,
                    attempt=attempt,
                    owner=payment["webhook_chain_message"],
                )
                return None
            await conn.execute(
                SQL["take_webhook_lease"], payment_id, token, lease_s, message_id, attempt
            )
        return payment

    async def _release(self, payment_id: UUID, token: str) -> None:
        """End this send's lease early (no POST was made); best effort, it expires anyway."""
        with contextlib.suppress(Exception):
            async with self._pool.acquire() as conn, transaction(conn, self._database):
                await conn.execute(SQL["release_webhook_lease"], payment_id, token)

    def retry_after_s(self, failure: Exception | None, attempt: int) -> float | None:
        """Seconds until this chain's retry comes back from its tier (the consumer's
        policy: a retryable failure with tiers left), None when no retry follows."""
        return retry_after_s(self._broker.retry_tiers_ms, failure, attempt)

    async def _send(self, payment_id: UUID, message_id: str, attempt: int) -> None:
        token = f"{self._worker}:{uuid4().hex[:12]}"
        payment = await self._claim(payment_id, token, message_id, attempt)
        if payment is None:
            return
        started = asyncio.Event()
        try:
            # Step 2, no transaction open: the whole send stays within the lease.
            http_status, failure = await self.post_within(
                payment, self._settings.webhook_timeout_s, started
            )
        except BaseException as exc:  # a refused URL (raised on: it dead-letters), a cancel
            if started.is_set():  # cut short mid-POST: count it as a failed attempt
                await self.record_cancelled(payment_id, token, attempt + 1)
            else:
                if isinstance(exc, UnsafeWebhookUrl):  # counted once, by the chain that
                    WEBHOOK_ATTEMPTS.labels("refused").inc()  # dead-letters it
                await self._release(payment_id, token)
            raise
        # Step 3: count the attempt, the delivery time on a 2xx, end the lease, and note
        # when this chain's retry is due back (the sweep and duplicates wait for it).
        # One autocommitted statement, which also appends the attempt log's row.
        await self.record(
            payment_id,
            token,
            http_status,
            failure,
            self.retry_after_s(failure, attempt),
            attempt + 1,
        )
        if failure is not None:
            raise failure

    async def post_within(
        self, payment: PaymentRow, timeout_s: float, started: asyncio.Event
    ) -> tuple[int | None, Exception | None]:
        """Step 2 of a send, with no transaction open: resolve and check the payment's
        webhook URL, then POST its signed notification, all within `timeout_s` seconds.
        Returns (HTTP status or None without an answer, the failure or None for a 2xx);
        a timeout is a failure. Raises `UnsafeWebhookUrl` (never POSTed; the chain that
        dead-letters it counts it `refused`, once) and a cancellation. `started` is set
        just before the request is sent: from then on the merchant may have it, so a
        cancelled send counts its attempt (`record_cancelled`) instead of handing the job
        back as unsent."""
        url: str = payment["webhook_url"]
        try:
            async with asyncio.timeout(timeout_s):
                approved = await resolve_webhook_url(
                    url, self._settings.webhook_allow_hosts, self._settings.webhook_nat64_prefixes
                )
                started.set()
                return await self._post(payment, url, approved)
        except TimeoutError as exc:
            return None, exc

    async def record(
        self,
        payment_id: UUID,
        token: str,
        http_status: int | None,
        failure: Exception | None,
        retry_after_s: float | None,
        next_attempt: int,
        held_job: int | None = None,
    ) -> int:
        """Step 3 of a send, one autocommitted statement (`record_webhook_attempt`): count
        the attempt and log it, set `webhook_delivered_at` on a 2xx, end the lease named
        `token` and note when the job is expected back (`retry_after_s` from now; None:
        no retry follows). `held_job` (a direct send's) is deleted on a delivery and made
        due in `retry_after_s` on a failure. A 2xx is recorded even after the lease was
        lost: on a webhook a chain dead-lettered meanwhile it is delivered late and the
        open dead letter resolved so (`chains.resolve_delivered_late`); a late failure changes
        nothing another send or chain owns. Returns the payment's attempt count."""
        logged_status, error = attempt_outcome(http_status, failure)
        async with self._pool.acquire() as conn:
            counted = await conn.fetchrow(
                SQL["record_webhook_attempt"],
                payment_id,
                failure is None,
                token,
                retry_after_s,
                next_attempt,
                logged_status,
                error,
                self._bounds.lock_timeout_ms,
                held_job,
                timeout=self._bounds.timeout_s,
            )
        assert counted is not None  # payments are never deleted
        attempts = int(counted["webhook_attempts"])
        WEBHOOK_ATTEMPTS.labels("failed" if failure is not None else "delivered").inc()
        if counted["was_dead"]:  # a 2xx after a chain dead-lettered it: delivered late
            await resolve_delivered_late(self._pool, payment_id, token, http_status, self._bounds)
        if failure is not None:
            log.warning(
                "payflow.webhooks.attempt_failed",
                attempt=attempts,
                error=f"{type(failure).__name__}: {failure}",
            )
        else:
            log.info("payflow.webhooks.delivered", attempt=attempts)
        return attempts

    async def record_cancelled(
        self, payment_id: UUID, token: str, next_attempt: int, held_job: int | None = None
    ) -> None:
        """A send cancelled during its POST: record a failed attempt (`WebhookSendCancelled`;
        the lease ends, the job is due again now), shielded from the cancellation that
        stopped the POST; best effort: if it cannot be written, the lease runs out."""
        with contextlib.suppress(Exception):
            await asyncio.shield(
                self.record(
                    payment_id, token, None, WebhookSendCancelled(), None, next_attempt, held_job
                )
            )

    async def _post(
        self, payment: PaymentRow, url: str, approved: list[str]
    ) -> tuple[int | None, Exception | None]:
        """One signed POST to one of the `approved` addresses (never a fresh DNS answer);
        returns (HTTP status or None without an answer, the failure or None for a 2xx)
        instead of raising it.

        Headers: the Standard Webhooks three, and `traceparent: 00-<payment's trace id>-
        <new span id>-01` so the merchant can join its logs to ours (omitted for a payment
        whose stored trace id is not a W3C trace id). The signature does not cover it.
        """
        body = webhook_body(payment)
        headers = signature_headers(
            payment["webhook_secret"], webhook_id(payment["id"]), int(time.time()), body
        )
        traceparent = outbound_traceparent(payment["trace_id"])
        if traceparent is not None:
            headers["traceparent"] = traceparent
        try:
            status = await self._client.post(url, body, headers, pinned=approved)
        except WebhookTransportError as exc:
            return None, exc
        if 200 <= status < 300:
            return status, None
        return status, WebhookHTTPStatus(status)

    async def on_dead(self, envelope: Envelope, error: PayflowError) -> None:
        """Retries exhausted (or a refused URL / answer): `dead_letter_webhook` in ONE
        transaction (nothing for a duplicate of a live chain, or a webhook already dead or
        delivered); with PostgreSQL unreachable, park the dead letter in Redis
        (`DlqFallback`; the drain runs `dead_letter_webhook` later)."""
        payload = dict(envelope.payload)
        text = f"{type(error).__name__}: {error}"

        async def write() -> None:
            async with self._pool.acquire() as conn, transaction(conn, self._database):
                await dead_letter_webhook(
                    conn,
                    payload,
                    text,
                    envelope.attempt,
                    message_id=envelope.message_id,
                    takeover_after_s=self._pipeline.webhook_sweep_after_s,
                )

        await self._fallback.record_for(
            write, envelope, source="webhook", subject_key="payment_id", error=text
        )
