"""Message format: versioned JSON bodies (amounts as strings) and the headers we rely on.

Headers: ``message-id`` (AMQP property) is the outbox id, ``trace-id`` and ``attempt``
(1 for the first delivery, +1 per retry tier) are AMQP headers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aio_pika
import orjson

from payflow.errors import BadInput

MESSAGE_VERSION = 1


@dataclass(frozen=True, slots=True)
class Envelope:
    """A decoded delivery: what handlers see."""

    message_id: str
    routing_key: str
    payload: dict[str, Any]
    trace_id: str
    attempt: int
    body: bytes


def build_message(
    body: bytes, *, message_id: str, trace_id: str | None, attempt: int
) -> aio_pika.Message:
    """A persistent message carrying our headers."""
    return aio_pika.Message(
        body=body,
        message_id=message_id,
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        headers={"trace-id": trace_id or "", "attempt": attempt},
    )


def encode_payload(payload: dict[str, Any]) -> bytes:
    """Serialise a payload; amounts must already be strings."""
    return orjson.dumps(payload)


def decode(message: aio_pika.abc.AbstractIncomingMessage) -> Envelope:
    """Decode a delivery; `BadInput` when the body or the version is not ours."""
    try:
        payload = orjson.loads(message.body)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"message body is not JSON: {exc}") from None
    if not isinstance(payload, dict) or payload.get("version") != MESSAGE_VERSION:
        raise BadInput("message payload is not a version 1 JSON object")
    headers = message.headers or {}
    raw_attempt = headers.get("attempt", 1)
    attempt = raw_attempt if isinstance(raw_attempt, int) and raw_attempt >= 1 else 1
    trace = headers.get("trace-id")
    if isinstance(trace, bytes):
        trace = trace.decode()
    return Envelope(
        message_id=message.message_id or "",
        routing_key=message.routing_key or "",
        payload=payload,
        trace_id=str(trace or ""),
        attempt=attempt,
        body=message.body,
    )
