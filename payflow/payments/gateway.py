"""Gateway adapters: the interface the payment worker calls, and the emulator."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol
from uuid import UUID


@dataclass(frozen=True, slots=True)
class ChargeRequest:
    """What the gateway is asked to charge; `payment_id` is its idempotency key."""

    payment_id: UUID
    amount: Decimal
    currency: str


@dataclass(frozen=True, slots=True)
class ChargeResult:
    """The gateway's answer: approved, or declined with a reason (a business outcome)."""

    approved: bool
    reason: str = ""


class Gateway(Protocol):
    """A payment gateway. A transient failure raises `RetryableError`; a decline is a result."""

    async def charge(self, request: ChargeRequest) -> ChargeResult:
        """Charge once per `request.payment_id` (real gateways dedupe on it)."""
        ...


class EmulatedGateway:
    """Answers after a random delay in [min, max] seconds; declines with `failure_rate`."""

    def __init__(
        self, delay_min_s: float, delay_max_s: float, failure_rate: float, seed: int | None = None
    ) -> None:
        self._delay_min = delay_min_s
        self._delay_max = max(delay_min_s, delay_max_s)
        self._failure_rate = failure_rate
        self._rng = random.Random(seed)  # noqa: S311 - emulation, not cryptography

    async def charge(self, request: ChargeRequest) -> ChargeResult:
        """Emulate a gateway round trip."""
        delay = self._rng.uniform(self._delay_min, self._delay_max)
        declined = self._rng.random() < self._failure_rate
        if delay > 0:
            await asyncio.sleep(delay)
        if declined:
            return ChargeResult(approved=False, reason="declined by gateway emulator")
        return ChargeResult(approved=True)
