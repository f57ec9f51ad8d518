"""Helpers of the integration tests on RabbitMQ and running roles: rabbitmqctl, polling
waits, queue consumers and depths, and roles running in the test's event loop."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aio_pika

from payflow.config import Settings

RABBIT_USER = "guest"


def rabbitmqctl(*args: str) -> str:
    done = subprocess.run(
        ["rabbitmqctl", "-q", *args], check=True, capture_output=True, text=True, timeout=60
    )
    return done.stdout


class Running:
    """Roles running in this event loop until `stop()`."""

    def __init__(self, task: asyncio.Task[None], stop_event: asyncio.Event) -> None:
        self.task = task
        self.stop_event = stop_event

    async def stop(self) -> None:
        self.stop_event.set()
        await asyncio.wait_for(self.task, timeout=30)


# How long a role process may take to start and report before the test calls the start
# failed: a wait, never a timing assertion. Importing payflow costs ~4 s of CPU, and with
# the suite's parallel files (the chaos run's own cluster among them) on two cores a start
# has been seen to take over 30 s.
START_LIMIT_S = 120.0


async def wait_until(
    check: Callable[[], Awaitable[Any]], *, limit_s: float = 30.0, what: str = "condition"
) -> Any:
    """Poll `check` until it returns a truthy value (no timing is asserted)."""
    deadline = time.monotonic() + limit_s
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def consumers(settings: Settings, queue: str) -> int:
    """Consumers of `queue` (0 while it does not exist yet), by a passive declare."""
    connection = await aio_pika.connect(settings.rabbitmq_url)
    try:
        channel = await connection.channel()
        try:
            declared = await channel.get_queue(queue)
        except aio_pika.exceptions.ChannelNotFoundEntity:
            return 0
        result = await declared.declare()
        return int(result.consumer_count or 0)
    finally:
        await connection.close()


async def queue_depth(settings: Settings, queue: str) -> int:
    """Messages ready in `queue`, read by a passive re-declare on the test's vhost."""
    connection = await aio_pika.connect(settings.rabbitmq_url)
    try:
        channel = await connection.channel()
        declared = await channel.get_queue(queue)
        result = await declared.declare()
        return int(result.message_count or 0)
    finally:
        await connection.close()
