"""Bounded retries that name what they retry (in the spirit of stamina).

Only `RetryableError` (after `classify`) is retried; attempts and total time are
both capped, and tests can switch the waiting off.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from payflow.errors import RetryableError, classify

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 5
    base_delay_s: float = 0.005
    max_delay_s: float = 0.5
    max_total_s: float = 10.0

    def delay(self, attempt: int) -> float:
        """Full-jitter exponential backoff for the wait after `attempt` (1-based)."""
        ceiling = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        return random.uniform(0, ceiling)  # noqa: S311 - jitter, not cryptography


@dataclass(slots=True)
class RetryStats:
    retries: int = 0


async def retrying(
    operation: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    stats: RetryStats | None = None,
) -> T:
    """Run `operation`, retrying only retryable failures within the policy's bounds.

    Non-retryable failures are re-raised classified; the last retryable failure is
    raised as `RetryableError` once attempts or time run out.
    """
    started = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return await operation()
        except Exception as exc:
            error = classify(exc)
            if not isinstance(error, RetryableError):
                if error is exc:
                    raise
                raise error from exc
            out_of_time = time.monotonic() - started >= policy.max_total_s
            if attempt >= policy.max_attempts or out_of_time:
                raise error from exc
        if stats is not None:
            stats.retries += 1
        await asyncio.sleep(policy.delay(attempt))
