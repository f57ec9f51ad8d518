"""Gateway adapters: the interface the payment worker calls, and the emulator.

The worker relies on two properties of every adapter (see `docs/pipeline.md`, "The
charge-claim protocol"):

* `charge` is idempotent keyed by the payment id: a second charge of the same payment
  returns the first answer and never charges the customer again;
* `status` reports what the gateway did with a payment's charge, or `None` when the
  gateway never saw one, so a worker that lost an answer (crash, timeout) asks instead
  of charging again.

A transient failure (gateway unreachable, timeout) raises `RetryableError`; a decline is
a `ChargeResult`, a business outcome.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Protocol
from uuid import UUID

from redis.asyncio import Redis
from redis.exceptions import RedisError

from payflow.errors import RetryableError


@dataclass(frozen=True, slots=True)
class ChargeRequest:
    """What the gateway is asked to charge; `payment_id` is its idempotency key."""

    payment_id: UUID
    amount: Decimal
    currency: str


@dataclass(frozen=True, slots=True)
class ChargeResult:
    """The gateway's answer: approved, or declined with a reason (a business outcome).

    `reference` is the gateway's own id of the charge (empty when it has none).
    """

    approved: bool
    reason: str = ""
    reference: str = ""


class Gateway(Protocol):
    """A payment gateway. A transient failure raises `RetryableError`; a decline is a result."""

    async def charge(self, request: ChargeRequest) -> ChargeResult:
        """Charge once per `request.payment_id`; a repeat returns the first answer."""
        ...

    async def status(self, payment_id: UUID) -> ChargeResult | None:
        """The answer the gateway gave (or is giving) for the payment's charge; `None`
        when the gateway never received a charge for it."""
        ...


@dataclass(frozen=True, slots=True)
class SettledCharge:
    """A charge the gateway settled (approved) on a day, as its own record shows it."""

    payment_id: UUID
    amount: Decimal
    currency: str
    reference: str


class SettlementRecord(Protocol):
    """A gateway that can list the charges it settled on a (UTC) day; what
    `payflow recon --gateway --date D` matches against the books."""

    async def settled(self, day: date) -> list[SettledCharge]:
        """Every charge approved on `day`. Raises `RetryableError` when unreachable."""
        ...


# The emulator's memory of one charge: the first answer wins, every charge call counts; a
# first answer that approves also lands in the day's settlement record (KEYS[2], a hash
# payment id -> "amount currency reference", the UTC day the charge arrived).
_CHARGE_SCRIPT = """
local count = redis.call('HINCRBY', KEYS[1], 'charges', 1)
if redis.call('HEXISTS', KEYS[1], 'approved') == 0 then
  redis.call('HSET', KEYS[1], 'approved', ARGV[1], 'reason', ARGV[2], 'reference', ARGV[3],
             'amount', ARGV[4], 'currency', ARGV[5])
  if ARGV[1] == '1' then
    redis.call('HSETNX', KEYS[2], ARGV[7], ARGV[4] .. ' ' .. ARGV[5] .. ' ' .. ARGV[3])
    redis.call('EXPIRE', KEYS[2], ARGV[6])
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[6])
local stored = redis.call('HMGET', KEYS[1], 'approved', 'reason', 'reference')
return {stored[1], stored[2], stored[3], count}
"""

EMULATOR_MEMORY_S = 30 * 24 * 3600  # how long the emulator remembers a charge
DECLINE_REASON = "declined by gateway emulator"


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


class EmulatedGateway:
    """A deterministic, idempotent stand-in for an external gateway, remembered in Redis.

    The decision and the delay derive from SHA-256(seed, payment id): the same payment
    gets the same answer from every instance with the same seed and failure rate, in any
    process, in any order. The first charge of a payment is stored in Redis under
    ``<prefix>gateway:charge:<payment id>`` (answer, amount, and a count of charge calls)
    so it survives a worker crash and is shared by all worker processes, as a real
    gateway's would be; a repeat charge returns the stored answer. Redis unreachable is
    the gateway unreachable: `RetryableError`.

    The charge is recorded when the request "arrives", before the emulated delay, so a
    worker killed during the delay leaves a charge behind that only `status` can reveal.
    """

    def __init__(
        self,
        redis: Redis,
        key_prefix: str,
        delay_min_s: float,
        delay_max_s: float,
        failure_rate: float,
        seed: int | None = None,
    ) -> None:
        self._redis = redis
        # EVALSHA with a load on NOSCRIPT: the script's text crosses the wire once.
        self._charge_script = redis.register_script(_CHARGE_SCRIPT)
        self._prefix = f"{key_prefix}gateway:charge:"
        self._settled_prefix = f"{key_prefix}gateway:settled:"
        self._delay_min = delay_min_s
        self._delay_max = max(delay_min_s, delay_max_s)
        self._failure_rate = failure_rate
        self._seed = 0 if seed is None else seed

    def _draws(self, payment_id: UUID) -> tuple[float, float]:
        """Two uniform numbers in [0, 1) fixed by (seed, payment id): decision, delay."""
        digest = hashlib.sha256(f"{self._seed}:{payment_id}".encode()).digest()
        scale = float(1 << 64)
        return (
            int.from_bytes(digest[:8], "big") / scale,
            int.from_bytes(digest[8:16], "big") / scale,
        )

    def decide(self, payment_id: UUID) -> ChargeResult:
        """The answer this emulator gives a first charge of `payment_id` (pure)."""
        decision, _ = self._draws(payment_id)
        reference = "emu_" + hashlib.sha256(f"ref:{payment_id}".encode()).hexdigest()[:24]
        if decision < self._failure_rate:
            return ChargeResult(approved=False, reason=DECLINE_REASON, reference=reference)
        return ChargeResult(approved=True, reference=reference)

    async def charge(self, request: ChargeRequest) -> ChargeResult:
        """Charge once per payment id: the first call decides, later calls get that answer.

        Raises `RetryableError` when Redis (the emulated gateway) is unreachable.
        """
        fresh = self.decide(request.payment_id)
        try:
            stored = await self._charge_script(
                keys=[
                    self._prefix + str(request.payment_id),
                    self._settled_prefix + datetime.now(UTC).date().isoformat(),
                ],
                args=[
                    "1" if fresh.approved else "0",
                    fresh.reason,
                    fresh.reference,
                    str(request.amount),
                    request.currency,
                    EMULATOR_MEMORY_S,
                    str(request.payment_id),
                ],
            )
        except RedisError as exc:
            raise RetryableError(f"gateway emulator unreachable: {exc}") from exc
        _, draw = self._draws(request.payment_id)
        delay = self._delay_min + draw * (self._delay_max - self._delay_min)
        if delay > 0:
            await asyncio.sleep(delay)
        return ChargeResult(
            approved=_text(stored[0]) == "1", reason=_text(stored[1]), reference=_text(stored[2])
        )

    async def status(self, payment_id: UUID) -> ChargeResult | None:
        """The stored answer for `payment_id`, or `None` if it was never charged.

        Raises `RetryableError` when Redis is unreachable.
        """
        try:
            stored = await self._redis.hmget(
                self._prefix + str(payment_id), ["approved", "reason", "reference"]
            )
        except RedisError as exc:
            raise RetryableError(f"gateway emulator unreachable: {exc}") from exc
        if stored[0] is None:
            return None
        return ChargeResult(
            approved=_text(stored[0]) == "1", reason=_text(stored[1]), reference=_text(stored[2])
        )

    async def charge_count(self, payment_id: UUID) -> int:
        """How many charge calls the emulator received for `payment_id` (0: none).

        For tests and chaos runs asserting "one gateway charge per payment".
        """
        try:
            count = await self._redis.hget(self._prefix + str(payment_id), "charges")
        except RedisError as exc:
            raise RetryableError(f"gateway emulator unreachable: {exc}") from exc
        return int(_text(count) or 0)

    async def settled(self, day: date) -> list[SettledCharge]:
        """The charges first approved on `day` (UTC), by payment id; kept as long as a
        charge (`EMULATOR_MEMORY_S`). Raises `RetryableError` when Redis is unreachable."""
        try:
            found = await self._redis.hgetall(self._settled_prefix + day.isoformat())
        except RedisError as exc:
            raise RetryableError(f"gateway emulator unreachable: {exc}") from exc
        charges = []
        for key, value in found.items():
            amount, currency, reference = _text(value).split(" ", 2)
            charges.append(SettledCharge(UUID(_text(key)), Decimal(amount), currency, reference))
        return sorted(charges, key=lambda c: str(c.payment_id))
