"""Publishing with publisher confirms and `mandatory` (unroutable messages raise)."""

from __future__ import annotations

import aio_pika

from payflow.broker.messages import build_message


async def publish(
    exchange: aio_pika.abc.AbstractExchange,
    routing_key: str,
    body: bytes,
    *,
    message_id: str,
    trace_id: str | None,
    attempt: int = 1,
) -> None:
    """Publish one persistent message and wait for the broker's confirm.

    Invariant: returning means the broker has the message durably routed to a queue;
    a nack, an unroutable return or a lost connection raises.
    """
    message = build_message(body, message_id=message_id, trace_id=trace_id, attempt=attempt)
    await exchange.publish(message, routing_key=routing_key, mandatory=True)
