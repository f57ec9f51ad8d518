"""Merchant webhook delivery, signed per Standard Webhooks.

The handler does nothing only when the payment is terminal AND its webhook is
delivered. Checking the status alone would be wrong: a message back from a retry tier
after a failed POST finds the payment already final, and must still send.
The POST happens while the payment row is locked (FOR UPDATE SKIP LOCKED), and the
attempt is counted in that same transaction; a crash between POST and commit means
the receiver may see the same `webhook-id` twice and dedupes on it.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping
from typing import Any
from uuid import UUID

import asyncpg
import httpx
import orjson
import structlog

from payflow.broker.messages import Envelope
from payflow.config import Settings
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.errors import NotFound, PayflowError, RetryableError, WebhookHTTPStatus
from payflow.metrics import WEBHOOK_ATTEMPTS
from payflow.money import format_at_scale
from payflow.observability import outbound_traceparent
from payflow.ops.dlq import record_dead_letter
from payflow.ops.dlq_fallback import DlqFallback
from payflow.ops.sweeps import mark_webhook_dead
from payflow.payments.processor import load_payment, payment_id_of
from payflow.webhooks.attempts import log_attempt
from payflow.webhooks.pinning import PinnedTransport, pinned
from payflow.webhooks.signing import signature_headers
from payflow.webhooks.ssrf import UnsafeWebhookUrl, resolve_webhook_url

SQL = load_queries("payflow.payments")
log = structlog.get_logger("payflow.webhooks")


def webhook_id(payment_id: UUID) -> str:
    """Stable across every retry and replay of one payment's notification."""
    return f"msg_{payment_id.hex}"


def webhook_body(payment: asyncpg.Record) -> bytes:
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


def build_http_client(settings: Settings) -> httpx.AsyncClient:
    """The one webhook HTTP client of a process: bounded pool, timeouts, no redirects, no
    env proxies, and a transport that connects only to the addresses pinned on each
    request (`payflow.webhooks.pinning`); a request without a pin is refused.

    TLS verifies against `WEBHOOK_CA_BUNDLE` when set (a PEM file), else certifi's roots.
    """
    if settings.webhook_ca_bundle:
        ssl_context = ssl.create_default_context(cafile=settings.webhook_ca_bundle)
    else:
        ssl_context = httpx.create_ssl_context(trust_env=False)
    limits = httpx.Limits(max_connections=settings.webhook_max_connections)
    return httpx.AsyncClient(
        transport=PinnedTransport(ssl_context, limits),
        timeout=httpx.Timeout(settings.webhook_timeout_s),
        follow_redirects=False,
        trust_env=False,
    )


class WebhookSender:
    """Handles `webhook.deliver` messages."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: Settings,
        client: httpx.AsyncClient,
        fallback: DlqFallback | None = None,
    ) -> None:
        self._pool = pool
        self._fallback = fallback or DlqFallback(None, settings)
        self._settings = settings
        self._client = client
        # A send holds a pooled connection (and the payment's row lock) for the whole
        # POST; bounding the sends keeps slow merchants from starving other handlers.
        self._sending = asyncio.Semaphore(settings.webhook_concurrency)

    async def handle(self, envelope: Envelope) -> None:
        """Send the payment's signed notification unless it was already delivered.

        Invariant: `webhook_delivered_at` is set once, by the first 2xx; every POST
        attempt is counted in `webhook_attempts`; the payment row is locked during the
        POST, so duplicate deliveries of one job never POST in parallel.
        """
        payment_id = payment_id_of(envelope)
        structlog.contextvars.bind_contextvars(payment_id=str(payment_id))
        async with self._sending:
            await self._send(payment_id)

    async def _send(self, payment_id: UUID) -> None:
        failure: Exception | None = None
        async with self._pool.acquire() as conn, transaction(conn, self._settings):
            payment = await conn.fetchrow(SQL["lock_payment_for_webhook"], payment_id)
            if payment is None:
                if await conn.fetchval(SQL["payment_exists"], payment_id):
                    raise RetryableError("another worker is sending this webhook right now")
                raise NotFound(f"payment {payment_id} does not exist")
            if payment["trace_id"]:  # the row's trace, also for a message without one
                structlog.contextvars.bind_contextvars(trace_id=payment["trace_id"])
            if payment["status"] == "pending":
                raise RetryableError("payment is not final yet")  # finalize makes this rare
            if payment["webhook_delivered_at"] is not None:
                log.info("payflow.webhooks.already_delivered")
                return
            url: str | None = payment["webhook_url"]
            if not url:
                return
            try:
                approved = await resolve_webhook_url(
                    url, self._settings.webhook_allow_hosts, self._settings.webhook_nat64_prefixes
                )
            except UnsafeWebhookUrl:
                WEBHOOK_ATTEMPTS.labels("refused").inc()  # never POSTed
                raise
            http_status, failure = await self._post(payment, url, approved)
            counted = await conn.fetchrow(
                SQL["record_webhook_attempt"], payment_id, failure is None
            )
            assert counted is not None
            await log_attempt(conn, payment_id, counted["webhook_attempts"], http_status, failure)
        WEBHOOK_ATTEMPTS.labels("failed" if failure is not None else "delivered").inc()
        if failure is not None:
            log.warning(
                "payflow.webhooks.attempt_failed",
                attempt=counted["webhook_attempts"],
                error=f"{type(failure).__name__}: {failure}",
            )
            raise failure
        log.info("payflow.webhooks.delivered", attempt=counted["webhook_attempts"])

    async def _post(
        self, payment: asyncpg.Record, url: str, approved: list[str]
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
            response = await self._client.post(
                url, content=body, headers=headers, extensions=pinned(approved)
            )
        except httpx.HTTPError as exc:
            return None, exc
        if 200 <= response.status_code < 300:
            return response.status_code, None
        return response.status_code, WebhookHTTPStatus(response.status_code)

    async def on_dead(self, envelope: Envelope, error: PayflowError) -> None:
        """Retries exhausted (or a refused URL / answer): `dead_letter_webhook` in ONE
        transaction; with PostgreSQL unreachable, park the dead letter in Redis
        (`DlqFallback`; the drain runs `dead_letter_webhook` later)."""
        payload = dict(envelope.payload)
        text = f"{type(error).__name__}: {error}"

        async def write() -> None:
            async with self._pool.acquire() as conn, transaction(conn, self._settings):
                await dead_letter_webhook(conn, payload, text, envelope.attempt)

        await self._fallback.record_for(
            write, envelope, source="webhook", subject_key="payment_id", error=text
        )


async def dead_letter_webhook(
    conn: Connection,
    payload: dict[str, Any],
    error: str,
    attempt: int,
    *,
    fallback: Mapping[str, str] | None = None,
) -> int | None:
    """Inside the caller's transaction: record the DLQ row and mark the webhook
    dead-lettered (`webhook_dead_at`), so the webhook sweep never re-sends it; the payment
    keeps its terminal status and `webhook_delivered_at` stays null. A webhook delivered
    meanwhile (a duplicate job gave up) records nothing and returns None: delivered or
    dead-lettered, never both. Shared by `on_dead` and the Redis DLQ drain."""
    subject = str(payload.get("payment_id"))
    attempts = attempt
    try:
        payment = await load_payment(conn, UUID(subject))
    except (ValueError, NotFound):
        payment = None
    if payment is not None:
        if not await mark_webhook_dead(conn, payment["id"]):
            return None  # delivered: a duplicate job gave up, but the webhook arrived
        attempts = max(int(payment["webhook_attempts"]), 1)
    return await record_dead_letter(
        conn,
        source="webhook",
        subject_id=subject,
        payload=payload,
        error=error,
        attempt=attempts,
        fallback=fallback,
    )
