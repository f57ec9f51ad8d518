"""RabbitMQ (machinery): topology and every topic name, connections, publishing with
confirms, the consumer with retry tiers, messages, queue depths.

The names other packages use; import them from here or from their module."""

from payflow.broker.connection import confirm_channel, connect, short_connection
from payflow.broker.consumer import Consumer, Route
from payflow.broker.depths import BrokerUnreachable, QueueDepth, queue_depths, unconsumed
from payflow.broker.messages import Envelope, encode_payload, payment_id_of
from payflow.broker.publisher import publish
from payflow.broker.topology import (
    TOPIC_LEDGER_EVENT,
    TOPIC_NOTIFICATION,
    TOPIC_PAYMENT_CREATED,
    TOPIC_PAYOUT_NOTIFICATION,
    TOPIC_WEBHOOK_DELIVER,
    UNROUTED_TOPICS,
    WORK_QUEUES,
    Names,
    declare_topology,
)

__all__ = [
    "TOPIC_LEDGER_EVENT",
    "TOPIC_NOTIFICATION",
    "TOPIC_PAYMENT_CREATED",
    "TOPIC_PAYOUT_NOTIFICATION",
    "TOPIC_WEBHOOK_DELIVER",
    "UNROUTED_TOPICS",
    "WORK_QUEUES",
    "BrokerUnreachable",
    "Consumer",
    "Envelope",
    "Names",
    "QueueDepth",
    "Route",
    "confirm_channel",
    "connect",
    "declare_topology",
    "encode_payload",
    "payment_id_of",
    "publish",
    "queue_depths",
    "short_connection",
    "unconsumed",
]
