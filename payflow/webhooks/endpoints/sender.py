"""Delivery of merchant events to webhook endpoints (`endpoint.deliver` on the `endpoints`
queue), with the payments' webhook machinery: the pinned HTTP client and SSRF guard, the
Standard Webhooks signing, the broker's retry tiers, the DLQ and its Redis fallback.

A delivery (one event and one endpoint, `webhook_deliveries`) is sent as a payment's webhook
is, never holding the database while the merchant answers:

1. claim, one autocommitted statement: a pending delivery of an enabled endpoint with no
   live lease takes a lease (`WEBHOOK_LEASE_S`); anything else (delivered, dead, another
   send's live lease, a disabled endpoint) is acked and dropped;
2. POST with no transaction open, bounded by `WEBHOOK_TIMEOUT_S` (below the lease);
3. record, one autocommitted statement: count the attempt, log it (time, status,
   duration, error), mark a 2xx delivered, end the lease, note when the retry is due.

A crash between 1 and 3 leaves the lease to expire; the broker redelivers the message or
the sweep (`sweep_overdue_deliveries`) re-announces the delivery, and the next POST carries
the same `webhook-id` (the event's id), which the receiver dedupes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from typing import Any
from uuid import uuid4

import asyncpg
import structlog

from payflow.broker.messages import Envelope
from payflow.config import BrokerSettings, DatabaseSettings, WebhookSettings
from payflow.db.queries import load_queries
from payflow.db.tx import StatementBounds, transaction
from payflow.dlq.fallback import DlqFallback
from payflow.errors import (
    BadInput,
    PayflowError,
    WebhookHTTPStatus,
    WebhookTransportError,
)
from payflow.metrics import WEBHOOK_ATTEMPTS
from payflow.webhooks.client import WebhookClient
from payflow.webhooks.endpoints.dead import DLQ_SOURCE, dead_letter_delivery
from payflow.webhooks.events import event_body
from payflow.webhooks.signing import sign, signature_headers
from payflow.webhooks.ssrf import UnsafeWebhookUrl, resolve_webhook_url
from payflow.webhooks.tiers import retry_after_s

SQL = load_queries("payflow.webhooks.endpoints")
log = structlog.get_logger("payflow.webhooks.endpoints")


def delivery_id_of(envelope: Envelope) -> int:
    """The delivery an `endpoint.deliver` message names; `BadInput` (dead-lettered at
    once) when the payload has no integer `delivery_id`."""
    value = envelope.payload.get("delivery_id")
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput("endpoint.deliver message without an integer delivery_id")
    return value


def delivery_headers(
    secret: str, previous_secret: str | None, event_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The Standard Webhooks headers of one POST: `webhook-id` = the event id (the same on
    every retry), `webhook-timestamp` = `timestamp` (Unix seconds), `webhook-signature` =
    `v1,<base64>` by `secret`, followed (space-separated) by the signature of
    `previous_secret` while a rotation's overlap runs (None: one signature)."""
    headers = signature_headers(secret, event_id, timestamp, body)
    if previous_secret is not None:
        old = sign(previous_secret, event_id, timestamp, body)
        headers["webhook-signature"] = f"{headers['webhook-signature']} {old}"
    return headers


class EndpointSender:
    """Handles `endpoint.deliver` messages (route `endpoints`)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: WebhookSettings,
        client: WebhookClient,
        fallback: DlqFallback | None = None,
        *,
        database: DatabaseSettings,
        broker: BrokerSettings,
    ) -> None:
        """`settings`: the webhooks slice (timeout, lease, SSRF rules, in-flight bound);
        `database` bounds the statements, `broker` gives the retry tiers."""
        self._pool = pool
        self._settings = settings
        self._client = client
        self._fallback = fallback if fallback is not None else DlqFallback.disabled()
        self._database = database
        self._broker = broker
        self._bounds = StatementBounds.of(database)
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        # Sends in flight in this process, the finalizing worker's own ones included.
        self.sending = asyncio.Semaphore(settings.webhook_max_in_flight)

    async def handle(self, envelope: Envelope) -> None:
        """Send the delivery the message names unless nothing is left to send.

        Raises the POST's failure (classified by the consumer: retried on its tiers, then
        `on_dead`), `UnsafeWebhookUrl` for a URL the SSRF guard refuses now. Never raises
        for a delivered, dead, leased or disabled delivery: it is dropped.
        Invariant: at most one send of a delivery POSTs at a time (the lease); every POST
        is counted and logged; a 2xx marks it delivered even if recorded late.
        """
        delivery_id = delivery_id_of(envelope)
        structlog.contextvars.bind_contextvars(delivery_id=delivery_id)
        async with self.sending:
            await self._send(delivery_id, envelope.attempt)

    def retry_after_s(self, failure: Exception | None, attempt: int) -> float | None:
        """Seconds until this message's retry is back from its tier, None when none follows."""
        return retry_after_s(self._broker.retry_tiers_ms, failure, attempt)

    async def _send(self, delivery_id: int, attempt: int) -> None:
        token = f"{self.worker}:{uuid4().hex[:12]}"
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                SQL["claim_delivery"],
                delivery_id,
                token,
                self._settings.webhook_lease_s,
                timeout=self._bounds.timeout_s,
            )
        if row is None:
            WEBHOOK_ATTEMPTS.labels("duplicate").inc()
            log.info("payflow.webhooks.endpoints.nothing_to_send")
            return
        started = asyncio.Event()
        began = time.monotonic()
        try:
            status, failure = await self.post_within(row, started)
        except BaseException as exc:
            if started.is_set():
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.record(delivery_id, token, None, exc, began, None))
            else:
                if isinstance(exc, UnsafeWebhookUrl):
                    WEBHOOK_ATTEMPTS.labels("refused").inc()
                with contextlib.suppress(Exception):
                    async with self._pool.acquire() as conn:
                        await conn.execute(SQL["release_delivery"], delivery_id, token)
            raise
        await self.record(
            delivery_id, token, status, failure, began, self.retry_after_s(failure, attempt)
        )
        if failure is not None:
            raise failure

    async def post_within(
        self, row: asyncpg.Record, started: asyncio.Event
    ) -> tuple[int | None, Exception | None]:
        """Resolve and check the endpoint's URL, then POST the signed event, all within
        `WEBHOOK_TIMEOUT_S`; (HTTP status or None, failure or None for a 2xx). `row` is a
        claimed delivery (`claim_delivery`'s columns); `started` is set once the URL is
        approved, just before the request goes out. Raises `UnsafeWebhookUrl` (nothing
        sent) for a URL the SSRF guard refuses now."""
        data: dict[str, Any] = row["data"]
        body = event_body(row["type"], row["created_at"], data)
        headers = delivery_headers(
            row["secret"], row["previous_secret"], row["event_id"], int(time.time()), body
        )
        url: str = row["url"]
        try:
            async with asyncio.timeout(self._settings.webhook_timeout_s):
                approved = await resolve_webhook_url(
                    url, self._settings.webhook_allow_hosts, self._settings.webhook_nat64_prefixes
                )
                started.set()
                try:
                    status = await self._client.post(url, body, headers, pinned=approved)
                except WebhookTransportError as exc:
                    return None, exc
        except TimeoutError as exc:
            return None, exc
        if 200 <= status < 300:
            return status, None
        return status, WebhookHTTPStatus(status)

    async def record(
        self,
        delivery_id: int,
        token: str,
        status: int | None,
        failure: BaseException | None,
        began: float,
        retry_after_s: float | None,
        *,
        held_job: int | None = None,
    ) -> None:
        """Step 3: one autocommitted statement (`record_delivery_attempt`): count and log
        the attempt (`began`: the send's monotonic start, for its duration), end lease
        `token`, mark a 2xx delivered; the retry is due in `retry_after_s` (None: now).
        `held_job`: the held `endpoint.deliver` job of a direct send, deleted on a 2xx,
        else made due with the retry."""
        duration_ms = max(int((time.monotonic() - began) * 1000), 0)
        error = None if failure is None else f"{type(failure).__name__}: {failure}"[:500]
        async with self._pool.acquire() as conn:
            attempts = await conn.fetchval(
                SQL["record_delivery_attempt"],
                delivery_id,
                token,
                failure is None,
                status,
                duration_ms,
                error,
                retry_after_s,
                held_job,
                timeout=self._bounds.timeout_s,
            )
        WEBHOOK_ATTEMPTS.labels("failed" if failure is not None else "delivered").inc()
        if failure is None:
            log.info("payflow.webhooks.endpoints.delivered", attempt=attempts, status=status)
        else:
            log.warning("payflow.webhooks.endpoints.attempt_failed", attempt=attempts, error=error)

    async def on_dead(self, envelope: Envelope, error: PayflowError) -> None:
        """Retries exhausted (or a refused URL): mark the delivery dead with its one DLQ
        row (source `endpoint_delivery`) in one transaction; with PostgreSQL unreachable,
        park it in Redis (the drain redoes it through `ENDPOINT_DEAD_LETTERER`)."""
        payload = dict(envelope.payload)
        text = f"{type(error).__name__}: {error}"

        async def write() -> None:
            async with self._pool.acquire() as conn, transaction(conn, self._database):
                await dead_letter_delivery(conn, payload, text, envelope.attempt)

        await self._fallback.record_for(
            write, envelope, source=DLQ_SOURCE, subject_key="delivery_id", error=text
        )
