"""Queue depths for `payflow status`: a passive declare of each queue reports its
ready messages and consumers without creating or changing anything."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aio_pika
import aiormq

from payflow.broker.connection import short_connection
from payflow.broker.topology import FEED_QUEUES, WORK_QUEUES, Names
from payflow.config import BrokerSettings


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """One queue: `kind` work|retry|dlq|feed, ready `messages` and `consumers` (None: the
    queue does not exist)."""

    name: str
    kind: str
    messages: int | None
    consumers: int | None


class BrokerUnreachable(Exception):
    """RabbitMQ did not answer within the timeout (or refused the connection)."""


def queue_names(settings: BrokerSettings) -> list[tuple[str, str]]:
    """(name, kind) of every work, retry-tier and parking (DLQ) queue of the topology,
    then each notification feed queue as kind ``feed``: not declared any more, but one
    left by an earlier version may still hold messages with nothing to drain it."""
    names = Names(settings.broker_prefix)
    out: list[tuple[str, str]] = []
    for wq in WORK_QUEUES:
        out.append((names.queue(wq.name), "work"))
        out.extend((names.retry_queue(wq.name, tier), "retry") for tier in settings.retry_tiers_ms)
        out.append((names.parking_queue(wq.name), "dlq"))
    out.extend((names.queue(wq.name), "feed") for wq in FEED_QUEUES)
    return out


def unconsumed(depths: list[QueueDepth]) -> list[QueueDepth]:
    """The work and feed queues that hold messages with no consumer attached: nothing
    drains them, so they grow until a broker alarm blocks every publisher. Retry tiers
    (drained by their TTL) and parking queues (the DLQ, read by hand) have no consumer
    by design and are not listed."""
    return [q for q in depths if q.kind in ("work", "feed") and q.messages and not q.consumers]


async def queue_depths(settings: BrokerSettings, timeout_s: float) -> list[QueueDepth]:
    """Passively declare every queue of the topology and read its counts.

    Raises `BrokerUnreachable` when RabbitMQ cannot be reached within `timeout_s`. A
    missing queue (the broker closes the channel) is reported with `messages=None`.
    """
    try:
        async with short_connection(settings.broker_urls(), timeout_s) as connection:
            return await _read_depths(connection, settings, timeout_s)
    except (TimeoutError, OSError, aio_pika.exceptions.AMQPError) as exc:
        raise BrokerUnreachable(f"{type(exc).__name__}: {exc}") from None


async def _read_depths(
    connection: aio_pika.Connection, settings: BrokerSettings, timeout_s: float
) -> list[QueueDepth]:
    """One `QueueDepth` per queue of the topology, in order."""
    depths: list[QueueDepth] = []
    channel = await connection.channel()
    for name, kind in queue_names(settings):
        try:
            queue = await asyncio.wait_for(
                channel.declare_queue(name, passive=True), timeout=timeout_s
            )
        except aiormq.exceptions.ChannelNotFoundEntity:
            depths.append(QueueDepth(name, kind, None, None))
            channel = await connection.channel()  # the broker closed the old one
            continue
        result = queue.declaration_result
        depths.append(QueueDepth(name, kind, result.message_count, result.consumer_count))
    return depths
