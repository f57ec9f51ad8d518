"""Consuming: ack after commit, retry tiers, dead-lettering, graceful stop.

A handler returns normally when its effect is committed (or was already there); the
message is acked only then. A retryable failure is republished to the next tier with
attempt+1 and the original acked; past the last tier (or on a failure retrying cannot
fix) the route's `on_dead` hook records the DLQ row and marks the subject failed in
one transaction, the message is parked in the DLQ queue, and the original acked.
Nothing is ever nack-requeued in a loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aio_pika
import structlog

from payflow.broker.messages import Envelope, decode, trace_id_of
from payflow.broker.publisher import publish
from payflow.broker.topology import Names
from payflow.config import BrokerSettings
from payflow.errors import BadInput, BusinessOutcome, PayflowError, RetryableError, classify
from payflow.metrics import CONSUMER_MESSAGES

Handler = Callable[[Envelope], Awaitable[None]]
DeadHook = Callable[[Envelope, PayflowError], Awaitable[None]]

log = structlog.get_logger("payflow.consumer")

DEAD_HOOK_BACKOFF_S = 1.0


@dataclass(frozen=True, slots=True)
class Route:
    """A work queue (short name) with its handler and its dead-letter hook.

    `prefetch`: messages in flight on this route (None: `BROKER_PREFETCH`); each route
    consumes on its own channel, so a route waiting on slow outsiders (the gateway,
    merchants) has its own bound and never takes the others' slots.
    """

    queue: str
    handler: Handler
    on_dead: DeadHook
    prefetch: int | None = None


@dataclass(frozen=True, slots=True)
class _Lane:
    """One route's channel and the exchanges its failures are published to."""

    channel: aio_pika.abc.AbstractChannel
    retry_exchange: aio_pika.abc.AbstractExchange
    dlx: aio_pika.abc.AbstractExchange


class Consumer:
    """Consumes a set of routes, one channel each; `stop()` drains in-flight work."""

    def __init__(
        self,
        connection: aio_pika.abc.AbstractRobustConnection,
        settings: BrokerSettings,
        names: Names,
        routes: list[Route],
    ) -> None:
        self._connection = connection
        self._settings = settings
        self._names = names
        self._routes = routes
        self._lanes: dict[str, _Lane] = {}
        self._consumers: list[tuple[aio_pika.abc.AbstractQueue, str]] = []
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def start(self) -> None:
        """Open one channel per route with its prefetch and start consuming every route."""
        for route in self._routes:
            channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
            await channel.set_qos(prefetch_count=route.prefetch or self._settings.broker_prefetch)
            self._lanes[route.queue] = _Lane(
                channel,
                await channel.get_exchange(self._names.retry_exchange),
                await channel.get_exchange(self._names.dlx),
            )
            queue = await channel.get_queue(self._names.queue(route.queue))
            tag = await queue.consume(self._callback(route))
            self._consumers.append((queue, tag))
        log.info("payflow.consumer.started", queues=[r.queue for r in self._routes])

    async def stop(self, grace_s: float) -> None:
        """Stop taking messages, then wait (up to `grace_s`) for in-flight ones to finish.

        Unfinished messages stay unacked and are redelivered to another worker.
        """
        for queue, tag in self._consumers:
            try:
                await queue.cancel(tag)
            except Exception as exc:  # the channel may already be gone
                log.warning("payflow.consumer.cancel_failed", error=str(exc))
        self._consumers.clear()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=grace_s)
        except TimeoutError:
            log.warning("payflow.consumer.drain_timeout", inflight=self._inflight)
        for lane in self._lanes.values():
            if not lane.channel.is_closed:
                await lane.channel.close()
        log.info("payflow.consumer.stopped")

    def _callback(
        self, route: Route
    ) -> Callable[[aio_pika.abc.AbstractIncomingMessage], Awaitable[None]]:
        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            self._inflight += 1
            self._idle.clear()
            try:
                await self._process(route, message)
            finally:
                self._inflight -= 1
                if self._inflight == 0:
                    self._idle.set()

        return on_message

    async def _process(self, route: Route, message: aio_pika.abc.AbstractIncomingMessage) -> None:
        try:
            envelope = decode(message)
        except BadInput as exc:
            log.error(
                "payflow.consumer.undecodable",
                queue=route.queue,
                trace_id=trace_id_of(dict(message.headers or {})),
                error=str(exc),
            )
            await message.reject(requeue=False)  # the queue's DLX parks it
            CONSUMER_MESSAGES.labels(route.queue, "dead_lettered").inc()
            return
        # Every line logged while handling this message (handler, retry, DLQ) carries
        # the message's trace id; unbound in `finally`, so it never leaks to the next one.
        structlog.contextvars.bind_contextvars(
            trace_id=envelope.trace_id, message_id=envelope.message_id, queue=route.queue
        )
        try:
            outcome = "acked"
            try:
                await route.handler(envelope)
                log.debug("payflow.consumer.handled", attempt=envelope.attempt)
            except Exception as exc:
                outcome = await self._on_failure(route, envelope, classify(exc))
            await message.ack()
            CONSUMER_MESSAGES.labels(route.queue, outcome).inc()  # settled, counted once
        except Exception as exc:
            # The ack or the retry publish could not reach the broker: the message stays
            # unacked and the broker redelivers it; handlers are idempotent.
            log.warning("payflow.consumer.unsettled", queue=route.queue, error=str(exc))
            if not message.processed:
                try:
                    await asyncio.sleep(DEAD_HOOK_BACKOFF_S)
                    await message.nack(requeue=True)
                except Exception as nack_error:
                    log.warning("payflow.consumer.nack_failed", error=str(nack_error))
        finally:
            structlog.contextvars.unbind_contextvars(
                "trace_id", "message_id", "queue", "payment_id", "event_id"
            )

    async def _on_failure(self, route: Route, envelope: Envelope, error: PayflowError) -> str:
        """Settle a failed handling; returns the outcome label (terminal, retried,
        dead_lettered) of `payflow_consumer_messages_total`."""
        tiers = self._settings.retry_tiers_ms
        if isinstance(error, BusinessOutcome):
            log.info("payflow.consumer.terminal", queue=route.queue, outcome=str(error))
            return "terminal"
        if isinstance(error, RetryableError) and envelope.attempt <= len(tiers):
            tier = tiers[envelope.attempt - 1]
            await publish(
                self._lanes[route.queue].retry_exchange,
                self._names.retry_key(route.queue, tier),
                envelope.body,
                message_id=envelope.message_id,
                trace_id=envelope.trace_id,
                attempt=envelope.attempt + 1,
            )
            log.warning(
                "payflow.consumer.retry_scheduled",
                queue=route.queue,
                attempt=envelope.attempt,
                tier_ms=tier,
                error=str(error),
            )
            return "retried"
        # Record first: with the DB unreachable the hook parks the dead letter in Redis
        # (dlq/fallback.py); if that fails too it raises, the message is not acked
        # and comes back, so the DLQ row is never lost.
        await route.on_dead(envelope, error)
        await publish(
            self._lanes[route.queue].dlx,
            self._names.queue(route.queue),
            envelope.body,
            message_id=envelope.message_id,
            trace_id=envelope.trace_id,
            attempt=envelope.attempt,
        )
        log.error(
            "payflow.consumer.dead_lettered",
            queue=route.queue,
            attempt=envelope.attempt,
            error=f"{type(error).__name__}: {error}",
        )
        return "dead_lettered"
