"""The RabbitMQ topology, declared idempotently at start by every role.

Names derive from `Settings.broker_prefix` (default ``payflow``):

- exchange ``payflow`` (direct): the work exchange; routing key = outbox topic.
- exchange ``payflow.retry`` (direct): retry tiers; routing key ``<queue>.<ms>``.
- exchange ``payflow.dlx`` (direct): parking; routing key = work queue name.
- per work queue ``payflow.<name>``: one retry queue per tier ``payflow.<name>.retry.<ms>ms``
  (``x-message-ttl`` = tier, dead-lettering back to ``payflow`` with the work routing key)
  and one parking queue ``payflow.<name>.dlq``.

With quorum queues (the default) every dead-lettering queue (work queues to parking,
retry tiers back to work) is at-least-once. Changing arguments of an existing queue is
refused by RabbitMQ (PRECONDITION_FAILED), reported as `TopologyMismatch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aio_pika
import aiormq

from payflow.config import BrokerSettings
from payflow.errors import PayflowError

# Every topic payflow publishes, named here once (the domains import them).
TOPIC_PAYMENT_CREATED = "payment.created"
TOPIC_LEDGER_EVENT = "ledger.event"
TOPIC_WEBHOOK_DELIVER = "webhook.deliver"
# One delivery of a merchant event to one of the merchant's webhook endpoints.
TOPIC_ENDPOINT_DELIVER = "endpoint.deliver"
TOPIC_NOTIFICATION = "notification.insufficient_funds"
TOPIC_PAYOUT_NOTIFICATION = "notification.payout"


class TopologyMismatch(PayflowError):
    """A queue or exchange exists with other arguments (PRECONDITION_FAILED)."""


@dataclass(frozen=True, slots=True)
class WorkQueue:
    """One work queue bound to one topic."""

    name: str  # short name, e.g. "payments"
    topic: str


# The queues payflow's own workers consume (`payflow worker`).
WORK_QUEUES: tuple[WorkQueue, ...] = (
    WorkQueue("payments", TOPIC_PAYMENT_CREATED),
    WorkQueue("ledger", TOPIC_LEDGER_EVENT),
    WorkQueue("webhooks", TOPIC_WEBHOOK_DELIVER),
    WorkQueue("endpoints", TOPIC_ENDPOINT_DELIVER),
)
# Notification feeds: topics with no consumer in payflow (merchants hear through
# webhooks). Their queues are not declared and nothing is published to them: the relay
# settles their outbox rows unpublished (`payflow.outbox.relay`), because a queue that
# nothing drains grows (about three messages per payout) until a broker memory or disk
# alarm blocks every publisher. Earlier versions declared these queues; `payflow
# status` names a leftover that still holds messages.
FEED_QUEUES: tuple[WorkQueue, ...] = (
    # A debit refused for insufficient funds (the ledger worker).
    WorkQueue("notifications", TOPIC_NOTIFICATION),
    # Payout state changes (held, sent, confirmed, failed).
    WorkQueue("payout_notifications", TOPIC_PAYOUT_NOTIFICATION),
)
# Outbox topics the relay settles without a publish: no queue is declared for them.
UNROUTED_TOPICS: frozenset[str] = frozenset(wq.topic for wq in FEED_QUEUES)


@dataclass(frozen=True, slots=True)
class Names:
    """Every exchange and queue name, derived from the prefix."""

    prefix: str

    @property
    def exchange(self) -> str:
        """The work exchange."""
        return self.prefix

    @property
    def retry_exchange(self) -> str:
        """The exchange of the retry tiers."""
        return f"{self.prefix}.retry"

    @property
    def dlx(self) -> str:
        """The parking (dead-letter) exchange."""
        return f"{self.prefix}.dlx"

    def queue(self, short: str) -> str:
        """A work queue."""
        return f"{self.prefix}.{short}"

    def retry_queue(self, short: str, tier_ms: int) -> str:
        """The TTL queue of one tier of one work queue."""
        return f"{self.prefix}.{short}.retry.{tier_ms}ms"

    def retry_key(self, short: str, tier_ms: int) -> str:
        """The routing key into that TTL queue."""
        return f"{self.queue(short)}.{tier_ms}"

    def parking_queue(self, short: str) -> str:
        """The parking queue of a work queue."""
        return f"{self.prefix}.{short}.dlq"


def declared_names(settings: BrokerSettings) -> tuple[list[str], list[str]]:
    """(queues, exchanges) that `declare_topology` may have declared under
    `settings.broker_prefix`: every work queue with its retry tiers and parking queue,
    the notification feeds' too (declared by earlier versions), and the three
    exchanges. For whoever must remove a prefix's
    objects again (a benchmark's throwaway prefix)."""
    names = Names(settings.broker_prefix)
    queues: list[str] = []
    for wq in WORK_QUEUES + FEED_QUEUES:
        queues.append(names.queue(wq.name))
        queues += [names.retry_queue(wq.name, tier) for tier in settings.retry_tiers_ms]
        queues.append(names.parking_queue(wq.name))
    return queues, [names.exchange, names.retry_exchange, names.dlx]


def _queue_args(settings: BrokerSettings, extra: dict[str, Any]) -> dict[str, Any]:
    """Arguments of one queue: `extra`, plus the queue type. A quorum queue that
    dead-letters gets `x-dead-letter-strategy: at-least-once` (RabbitMQ re-publishes with
    confirms and keeps the message until the target queue has it) with the
    `x-overflow: reject-publish` it requires. Classic queues dead-letter at most once;
    the database sweeps (`ledger/recovery.py`, `payments/sweeps.py`,
    `webhooks/sweeps.py`) cover what they drop."""
    args: dict[str, Any] = dict(extra)
    if settings.broker_quorum_queues:
        args["x-queue-type"] = "quorum"
        if "x-dead-letter-exchange" in args:
            args["x-dead-letter-strategy"] = "at-least-once"
            args["x-overflow"] = "reject-publish"
    return args


async def declare_topology(
    channel: aio_pika.abc.AbstractChannel, settings: BrokerSettings
) -> Names:
    """Declare every exchange and queue; safe to run any number of times.

    Invariant: all exchanges and queues are durable; a queue that exists with other
    arguments raises `TopologyMismatch` with a one-line remedy instead of a traceback.
    """
    names = Names(settings.broker_prefix)
    try:
        work = await channel.declare_exchange(
            names.exchange, aio_pika.ExchangeType.DIRECT, durable=True
        )
        retry = await channel.declare_exchange(
            names.retry_exchange, aio_pika.ExchangeType.DIRECT, durable=True
        )
        dlx = await channel.declare_exchange(names.dlx, aio_pika.ExchangeType.DIRECT, durable=True)
        for wq in WORK_QUEUES:
            queue_name = names.queue(wq.name)
            # The work queue's own dead-lettering is a safety net: a message rejected
            # outside our handler (undecodable body) lands in parking, not in the void.
            queue = await channel.declare_queue(
                queue_name,
                durable=True,
                arguments=_queue_args(
                    settings,
                    {"x-dead-letter-exchange": names.dlx, "x-dead-letter-routing-key": queue_name},
                ),
            )
            await queue.bind(work, routing_key=wq.topic)
            parking = await channel.declare_queue(
                names.parking_queue(wq.name),
                durable=True,
                arguments=_queue_args(settings, {}),
            )
            await parking.bind(dlx, routing_key=queue_name)
            for tier in settings.retry_tiers_ms:
                retry_queue = await channel.declare_queue(
                    names.retry_queue(wq.name, tier),
                    durable=True,
                    arguments=_queue_args(
                        settings,
                        {
                            "x-message-ttl": tier,
                            "x-dead-letter-exchange": names.exchange,
                            "x-dead-letter-routing-key": wq.topic,
                        },
                    ),
                )
                await retry_queue.bind(retry, routing_key=names.retry_key(wq.name, tier))
    except aiormq.exceptions.ChannelPreconditionFailed as exc:
        raise TopologyMismatch(
            f"RabbitMQ refused the topology ({exc}): a queue or exchange already exists "
            "with other arguments. Delete it (rabbitmqctl delete_queue NAME, or recreate the "
            "vhost / `docker compose down -v`) or set BROKER_PREFIX to a new name."
        ) from None
    return names
