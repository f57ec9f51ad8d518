"""Topology declaration is idempotent, and a mismatch gives an actionable one-liner."""

from __future__ import annotations

import aio_pika
import pytest

from payflow.broker.topology import TopologyMismatch, declare_topology
from payflow.config import Settings


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
