"""A three-state circuit breaker per chain, shared in Redis, with an in-process fallback.

States: closed (calls go through; consecutive failures are counted), open (calls are
refused with `ChainUnavailable` until `open_s` has passed), half-open (exactly one probe
call, won by `SET NX` on the probe key; its success closes the breaker, its failure
opens it again). Every replica sees one state through Redis:

    {prefix}chain:breaker:{chain}:failures  INCR, consecutive failures (reset on success)
    {prefix}chain:breaker:{chain}:open      SET EX open_s while open (its TTL is the wait)
    {prefix}chain:breaker:{chain}:probe     SET NX EX: the one half-open probe
    {prefix}chain:breaker:{chain}:tripped   SET (no TTL) from the first opening to closing

When Redis is unreachable the same logic runs on this process's memory (a Redis outage
only loses the sharing, never the protection). Only `RpcUnavailable` (transport,
timeout, HTTP status) counts as a failure: a JSON-RPC error is an answer.

Gauge `payflow_rpc_breaker_state{chain}`: 0 closed, 1 open, 2 half-open.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TypeVar

import structlog
from prometheus_client import Gauge
from redis.asyncio import Redis
from redis.exceptions import RedisError

from payflow.chain.rpc import RpcUnavailable
from payflow.errors import ChainUnavailable
from payflow.metrics import REGISTRY

log = structlog.get_logger("payflow.chain.breaker")
T = TypeVar("T")

BREAKER_STATE = Gauge(
    "payflow_rpc_breaker_state",
    "Circuit breaker of a chain's RPC: 0 closed, 1 open, 2 half-open",
    ("chain",),
    registry=REGISTRY,
)
REDIS_ERRORS = (RedisError, OSError)


class BreakerState(IntEnum):
    CLOSED = 0
    OPEN = 1
    HALF_OPEN = 2


@dataclass(slots=True)
class _Memory:
    """The in-process twin of the Redis keys (monotonic deadlines)."""

    failures: int = 0
    open_until: float = 0.0
    probe_until: float = 0.0
    tripped: bool = False


# The in-process fallback state, per (key prefix, chain), outlives one `Breaker` object
# (the deposits job builds its oracle per run): a Redis outage keeps the protection.
_FALLBACK: dict[tuple[str, str], _Memory] = {}


def _memory_for(prefix: str, chain: str) -> _Memory:
    return _FALLBACK.setdefault((prefix, chain), _Memory())


@dataclass(slots=True)
class Breaker:
    """The breaker of one chain. `call(fn)` runs `fn` under it; see the module docstring.

    `threshold` consecutive failures open it for `open_s` seconds; the half-open probe's
    key lives `probe_ttl_s` (so a probe that died frees the slot).
    """

    chain: str
    redis: Redis | None
    prefix: str = "payflow:"
    threshold: int = 3
    open_s: float = 30.0
    probe_ttl_s: float = 10.0
    _memory: _Memory = field(init=False)

    def __post_init__(self) -> None:
        self._memory = _memory_for(self.prefix, self.chain)

    def _key(self, name: str) -> str:
        return f"{self.prefix}chain:breaker:{self.chain}:{name}"

    async def state(self) -> BreakerState:
        """The state as every replica sees it (Redis), or this process's when Redis is down."""
        if self.redis is not None:
            try:
                values = await self.redis.mget(
                    [self._key("open"), self._key("probe"), self._key("tripped")]
                )
                state = self._from_flags(*(value is not None for value in values))
                BREAKER_STATE.labels(self.chain).set(state)
                return state
            except REDIS_ERRORS:
                pass
        now = time.monotonic()
        memory = self._memory
        state = self._from_flags(memory.open_until > now, memory.probe_until > now, memory.tripped)
        BREAKER_STATE.labels(self.chain).set(state)
        return state

    @staticmethod
    def _from_flags(is_open: bool, probing: bool, tripped: bool) -> BreakerState:
        if is_open:
            return BreakerState.OPEN
        if tripped or probing:  # the wait is over: one probe decides
            return BreakerState.HALF_OPEN
        return BreakerState.CLOSED

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """`await fn()` if the breaker lets it through; `ChainUnavailable` otherwise or
        when it fails with `RpcUnavailable` (the failure is counted)."""
        state = await self.state()
        probe = False
        if state is BreakerState.OPEN:
            raise ChainUnavailable(f"{self.chain}: the node's circuit breaker is open")
        if state is BreakerState.HALF_OPEN:
            if not await self._take_probe():
                raise ChainUnavailable(f"{self.chain}: the breaker is half-open, probing")
            probe = True
        try:
            result = await fn()
        except RpcUnavailable as error:
            await self._failed(probe)
            raise ChainUnavailable(f"{self.chain}: {error}") from None
        await self._succeeded(state, probe)
        return result

    async def _take_probe(self) -> bool:
        if self.redis is not None:
            try:
                won = await self.redis.set(
                    self._key("probe"), "1", nx=True, px=int(self.probe_ttl_s * 1000)
                )
                return bool(won)
            except REDIS_ERRORS:
                pass
        now = time.monotonic()
        if self._memory.probe_until > now:
            return False
        self._memory.probe_until = now + self.probe_ttl_s
        return True

    async def _failed(self, probe: bool) -> None:
        if self.redis is not None:
            try:
                if probe:
                    await self._open_redis()
                    return
                failures = await self.redis.incr(self._key("failures"))
                await self.redis.expire(self._key("failures"), int(self.open_s * 10) + 60)
                if failures >= self.threshold:
                    await self._open_redis()
                return
            except REDIS_ERRORS:
                pass
        memory = self._memory
        memory.failures += 1
        if probe or memory.failures >= self.threshold:
            memory.open_until = time.monotonic() + self.open_s
            memory.probe_until = 0.0
            memory.tripped = True
            self._opened()

    async def _open_redis(self) -> None:
        assert self.redis is not None
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self._key("open"), "1", px=int(self.open_s * 1000))
            pipe.set(self._key("tripped"), "1")
            pipe.delete(self._key("probe"), self._key("failures"))
            await pipe.execute()
        self._opened()

    def _opened(self) -> None:
        BREAKER_STATE.labels(self.chain).set(BreakerState.OPEN)
        log.warning("payflow.chain.breaker_opened", chain=self.chain, open_s=self.open_s)

    async def _succeeded(self, state: BreakerState, probe: bool) -> None:
        memory = self._memory
        closing = probe or state is not BreakerState.CLOSED or memory.tripped
        memory.failures = 0
        if closing:
            memory.tripped = False
            memory.probe_until = 0.0
            memory.open_until = 0.0
        if self.redis is not None:
            try:
                keys = [self._key("failures")]
                if closing:
                    keys += [self._key("tripped"), self._key("probe"), self._key("open")]
                await self.redis.delete(*keys)
            except REDIS_ERRORS:
                pass
        if closing:
            BREAKER_STATE.labels(self.chain).set(BreakerState.CLOSED)
            log.info("payflow.chain.breaker_closed", chain=self.chain)
