"""Topology declaration is idempotent, dead-letters at least once where RabbitMQ can,
and a mismatch gives an actionable one-liner."""

from __future__ import annotations

import json
from typing import Any

import aio_pika
import pytest

from payflow.broker.messages import build_message
from payflow.broker.topology import WORK_QUEUES, Names, TopologyMismatch, declare_topology
from payflow.config import Settings
from tests.integration.support import queue_depth, rabbitmqctl, wait_until


def _arguments(vhost: str) -> dict[str, dict[str, Any]]:
    """Every queue of the vhost with its declared arguments, as RabbitMQ reports them."""
    listed = json.loads(
        rabbitmqctl("list_queues", "-p", vhost, "name", "arguments", "--formatter", "json")
    )
    # Each argument is listed as [key, AMQP type, value].
    return {q["name"]: {arg[0]: arg[2] for arg in q["arguments"]} for q in listed}


async def _declare(settings: Settings) -> None:
    connection = await aio_pika.connect(settings.rabbitmq_url)
    try:
        await declare_topology(await connection.channel(), settings)
    finally:
        await connection.close()


async def test_declaring_twice_is_harmless_and_a_changed_queue_is_reported(
    pipe_settings: Settings,
) -> None:
    connection = await aio_pika.connect(pipe_settings.rabbitmq_url)
    try:
        channel = await connection.channel()
        await declare_topology(channel, pipe_settings)
        await declare_topology(channel, pipe_settings)
        changed = pipe_settings.model_copy(
            update={"retry_tiers_ms": (40, 80, 120), "broker_quorum_queues": False}
        )
        channel = await connection.channel()
        with pytest.raises(TopologyMismatch, match="already exists with other arguments"):
            await declare_topology(channel, changed)
    finally:
        await connection.close()


async def test_quorum_queues_dead_letter_at_least_once(pipe_settings: Settings, vhost: str) -> None:
    await _declare(pipe_settings)
    args = _arguments(vhost)
    names = Names(pipe_settings.broker_prefix)
    dead_lettering = [names.queue(wq.name) for wq in WORK_QUEUES] + [
        names.retry_queue(wq.name, tier)
        for wq in WORK_QUEUES
        for tier in pipe_settings.retry_tiers_ms
    ]
    for queue in dead_lettering:
        assert args[queue]["x-queue-type"] == "quorum", queue
        assert args[queue]["x-dead-letter-strategy"] == "at-least-once", queue
        assert args[queue]["x-overflow"] == "reject-publish", queue
    for wq in WORK_QUEUES:  # parking queues dead-letter nowhere
        assert "x-dead-letter-strategy" not in args[names.parking_queue(wq.name)]
    assert len(args) == len(dead_lettering) + len(WORK_QUEUES)


async def test_classic_queues_carry_no_strategy(pipe_settings: Settings, vhost: str) -> None:
    classic = pipe_settings.model_copy(update={"broker_quorum_queues": False})
    await _declare(classic)
    for name, queue_args in _arguments(vhost).items():
        assert "x-dead-letter-strategy" not in queue_args, name
        assert "x-overflow" not in queue_args, name


async def test_queue_declared_before_the_upgrade_is_reported_with_its_remedy(
    pipe_settings: Settings,
) -> None:
    names = Names(pipe_settings.broker_prefix)
    connection = await aio_pika.connect(pipe_settings.rabbitmq_url)
    try:
        channel = await connection.channel()
        tier = pipe_settings.retry_tiers_ms[0]
        await channel.declare_queue(  # the arguments the previous release declared
            names.retry_queue("ledger", tier),
            durable=True,
            arguments={
                "x-queue-type": "quorum",
                "x-message-ttl": tier,
                "x-dead-letter-exchange": names.exchange,
                "x-dead-letter-routing-key": "ledger.event",
            },
        )
        with pytest.raises(TopologyMismatch, match="BROKER_PREFIX"):
            await declare_topology(await connection.channel(), pipe_settings)
    finally:
        await connection.close()


async def test_message_expiring_from_a_retry_tier_reaches_the_work_queue(
    pipe_settings: Settings,
) -> None:
    names = Names(pipe_settings.broker_prefix)
    tier = pipe_settings.retry_tiers_ms[-1]
    connection = await aio_pika.connect(pipe_settings.rabbitmq_url)
    try:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        await declare_topology(channel, pipe_settings)
        retry = await channel.get_exchange(names.retry_exchange)
        await retry.publish(
            build_message(
                b'{"version": 1, "event_id": "e-1"}', message_id="1", trace_id=None, attempt=2
            ),
            routing_key=names.retry_key("ledger", tier),
            mandatory=True,
        )
    finally:
        await connection.close()
    await wait_until(
        lambda: queue_depth(pipe_settings, names.queue("ledger")), what="message back in work"
    )
    assert await queue_depth(pipe_settings, names.retry_queue("ledger", tier)) == 0
    assert await queue_depth(pipe_settings, names.queue("ledger")) == 1
