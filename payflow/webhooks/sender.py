"""Merchant webhook delivery, signed per Standard Webhooks.

The handler does nothing only when the payment is terminal AND its webhook is
delivered (or dead-lettered). Checking the status alone would be wrong: a message back
from a retry tier after a failed POST finds the payment already final, and must still send.

A send never holds the database while it waits for a merchant (issue 10):

1. claim, one short transaction: under the payment's row lock, check what is left to do
   and take the webhook's lease (`webhook_lease_token`, `webhook_lease_until` =
   now + `WEBHOOK_LEASE_S`); a live lease of another send makes this one retry later;
2. POST with no transaction open and no pooled connection held, bounded as a whole by
   `WEBHOOK_TIMEOUT_S` (below the lease, so two sends of one job never overlap);
3. record, a second short transaction: count the attempt, set `webhook_delivered_at` on a
   2xx, end the lease.

At most `WEBHOOK_MAX_IN_FLIGHT` sends run per process, independently of the DB pool. A
crash between POST and record leaves the lease to expire; the next send POSTs again with
the same `webhook-id`, which the receiver dedupes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import time
from collections.abc import Mapping
from typing import Any
from uuid import UUID, uuid4

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
from payflow.webhooks.shards import ShardedTransport, shard_count
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
    """The one webhook HTTP client of a process: bounded pools (max(`WEBHOOK_MAX_CONNECTIONS`,
    `WEBHOOK_MAX_IN_FLIGHT`) connections, split over pools of at most 16), timeouts, no
    redirects, no env proxies, and transports that connect only to the addresses pinned on
    each request (`payflow.webhooks.pinning`); a request without a pin is refused.

    TLS verifies against `WEBHOOK_CA_BUNDLE` when set (a PEM file), else certifi's roots.
    """
    if settings.webhook_ca_bundle:
        ssl_context = ssl.create_default_context(cafile=settings.webhook_ca_bundle)
    else:
        ssl_context = httpx.create_ssl_context(trust_env=False)
    # Never fewer connections than sends in flight: a send waiting for a pooled
    # connection would spend its timeout in the queue, not on the merchant.
    size = max(settings.webhook_max_connections, settings.webhook_max_in_flight)
    # Several small pools, not one large one (see `payflow.webhooks.shards`).
    shards = shard_count(size)
    per_shard = -(-size // shards)
    limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
    return httpx.AsyncClient(
        transport=ShardedTransport([PinnedTransport(ssl_context, limits) for _ in range(shards)]),
        timeout=httpx.Timeout(settings.webhook_timeout_s),
        follow_redirects=False,
        trust_env=False,
    )


class WebhookInFlight(RetryableError):
    """Another send holds the webhook's live lease; try again later."""


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
        self._worker = f"{socket.gethostname()}:{os.getpid()}"
        # Sends in flight per process; a send holds a pooled connection only for its two
        # short transactions, never while it waits for the merchant.
        self._sending = asyncio.Semaphore(settings.webhook_max_in_flight)

    async def handle(self, envelope: Envelope) -> None:
        """Send the payment's signed notification unless it was already delivered.

        Raises `WebhookInFlight` (retryable) while another send's lease is live, the POST's
        failure (classified by `payflow.errors.classify`), `UnsafeWebhookUrl` for a refused
        URL, `NotFound` for an unknown payment.

        Invariant: `webhook_delivered_at` is set once, by the first 2xx; every POST
        attempt is counted in `webhook_attempts`; a POST happens only under this send's
        lease, so two deliveries of one job never POST in parallel.
        """
        payment_id = payment_id_of(envelope)
        structlog.contextvars.bind_contextvars(payment_id=str(payment_id))
        async with self._sending:
            await self._send(payment_id)

    async def _claim(self, payment_id: UUID, token: str) -> asyncpg.Record | None:
        """Step 1: the payment (with its merchant's secret) under a fresh lease named
        `token`, or None when nothing is left to send."""
        async with self._pool.acquire() as conn, transaction(conn, self._settings):
            payment = await conn.fetchrow(SQL["lock_payment_for_webhook"], payment_id)
            if payment is None:
                raise NotFound(f"payment {payment_id} does not exist")
            if payment["trace_id"]:  # the row's trace, also for a message without one
                structlog.contextvars.bind_contextvars(trace_id=payment["trace_id"])
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
            if payment["lease_live"]:
                raise WebhookInFlight("another worker is sending this webhook right now")
            await conn.execute(
                SQL["take_webhook_lease"], payment_id, token, self._settings.webhook_lease_s
            )
        return payment

    async def _release(self, payment_id: UUID, token: str) -> None:
        """End this send's lease early (no POST was made); best effort, it expires anyway."""
        with contextlib.suppress(Exception):
            async with self._pool.acquire() as conn, transaction(conn, self._settings):
                await conn.execute(SQL["release_webhook_lease"], payment_id, token)

    async def _send(self, payment_id: UUID) -> None:
        token = f"{self._worker}:{uuid4().hex[:12]}"
        payment = await self._claim(payment_id, token)
        if payment is None:
            return
        url: str = payment["webhook_url"]
        failure: Exception | None
        try:
            # Step 2, no transaction open: the whole send stays within the lease.
            async with asyncio.timeout(self._settings.webhook_timeout_s):
                approved = await resolve_webhook_url(
                    url, self._settings.webhook_allow_hosts, self._settings.webhook_nat64_prefixes
                )
                http_status, failure = await self._post(payment, url, approved)
        except UnsafeWebhookUrl:
            WEBHOOK_ATTEMPTS.labels("refused").inc()  # never POSTed
            await self._release(payment_id, token)
            raise
        except TimeoutError as exc:
            http_status, failure = None, exc
        except BaseException:
            await self._release(payment_id, token)
            raise
        # Step 3: count the attempt, the delivery time on a 2xx, end the lease.
        async with self._pool.acquire() as conn, transaction(conn, self._settings):
            counted = await conn.fetchrow(
                SQL["record_webhook_attempt"], payment_id, failure is None, token
            )
            assert counted is not None  # payments are never deleted
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
    dead-lettered, never both. Raises `WebhookInFlight` (retryable) while another send's
    lease is live, so a POST in flight cannot be followed by a 2xx on a dead webhook.
    Shared by `on_dead` and the Redis DLQ drain."""
    subject = str(payload.get("payment_id"))
    attempts = attempt
    try:
        payment = await load_payment(conn, UUID(subject))
    except (ValueError, NotFound):
        payment = None
    if payment is not None:
        locked = await conn.fetchrow(SQL["lock_payment_for_webhook"], payment["id"])
        if locked is not None and locked["lease_live"]:
            # Another send is POSTing right now: its result decides; this message comes
            # back (not acked) and finds the webhook delivered, or dead-letters it then.
            raise WebhookInFlight("another worker is sending this webhook right now")
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
