"""Message format: versioned JSON bodies (amounts as strings) and the headers we rely on.

Headers: ``message-id`` (AMQP property) is the outbox id, ``trace-id`` and ``attempt``
(1 for the first delivery, +1 per retry tier) are AMQP headers. A message whose trace id
is a W3C trace id also carries ``traceparent`` (``00-<trace id>-<new span id>-01``, the
W3C AMQP binding); a consumer takes the trace id from a valid ``traceparent`` first,
then from ``trace-id`` (messages published before traceparent existed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

import aio_pika
import orjson

from payflow.errors import BadInput
from payflow.observability import outbound_traceparent, parse_traceparent

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
    """A persistent message carrying our headers (`traceparent` when `trace_id` is W3C)."""
    headers: dict[str, Any] = {"trace-id": trace_id or "", "attempt": attempt}
    traceparent = outbound_traceparent(trace_id)
    if traceparent is not None:
        headers["traceparent"] = traceparent
    return aio_pika.Message(
        body=body,
        message_id=message_id,
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        headers=headers,
    )


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) else ""


def trace_id_of(headers: dict[str, Any]) -> str:
    """The trace id a delivery carries: a valid `traceparent`'s, else `trace-id`, else ""."""
    parent = parse_traceparent(_text(headers.get("traceparent")))
    if parent is not None:
        return parent.trace_id
    return _text(headers.get("trace-id"))[:128]


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
    return Envelope(
        message_id=message.message_id or "",
        routing_key=message.routing_key or "",
        payload=payload,
        trace_id=trace_id_of(dict(headers)),
        attempt=attempt,
        body=message.body,
    )


def payment_id_of(envelope: Envelope) -> UUID:
    """The payment id a message is about (its payload's `payment_id`: the payment and
    webhook topics); `BadInput` when missing or malformed."""
    raw = envelope.payload.get("payment_id")
    try:
        return UUID(str(raw))
    except ValueError:
        raise BadInput(f"message has no valid payment_id ({raw!r})") from None
