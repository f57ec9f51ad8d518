"""Fixed-window rate limits per client, counted in Redis (shared by every worker)."""

from __future__ import annotations

import time

from redis.asyncio import Redis
from redis.exceptions import RedisError

from payflow.observability import log

from .errors import ApiProblem

WINDOW_SECONDS = 60
# One round trip: count the hit and give a fresh window key its expiry.
COUNT_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count
"""


async def hit(redis: Redis, prefix: str, client: str, limit: int) -> None:
    """Count one request for `client`; raise a 429 problem with Retry-After over `limit`.

    Invariant: at most `limit` requests per client per 60-second window pass, across
    all workers. When Redis is unreachable the request passes (fail open) and a
    warning is logged: rate limiting protects capacity, it does not guard money.
    """
    now = time.time()
    try:
        count = await redis.eval(COUNT_SCRIPT, 1, _key(prefix, client, now), WINDOW_SECONDS + 5)
    except (RedisError, OSError) as error:
        log.warning("payflow.api.ratelimit_unavailable", error=str(error))
        return
    if int(count) > limit:
        raise _too_many(now, f"more than {limit} requests per minute")


async def refuse_if_spent(redis: Redis, prefix: str, client: str, limit: int) -> None:
    """Raise the 429 problem when `client` has already used `limit` hits of this
    window (as `hit` counts them), without counting one. Fails open like `hit`."""
    now = time.time()
    try:
        count = await redis.get(_key(prefix, client, now))
    except (RedisError, OSError) as error:
        log.warning("payflow.api.ratelimit_unavailable", error=str(error))
        return
    if count is not None and int(count) >= limit:
        raise _too_many(now, f"more than {limit} failed authentications a minute from this address")


def _key(prefix: str, client: str, now: float) -> str:
    """The counter of `client`'s fixed window containing `now` (epoch seconds)."""
    return f"{prefix}rl:{client}:{int(now // WINDOW_SECONDS)}"


def _too_many(now: float, why: str) -> ApiProblem:
    """The 429 problem, with Retry-After up to the end of the window containing `now`."""
    window = int(now // WINDOW_SECONDS)
    retry_after = max(1, int((window + 1) * WINDOW_SECONDS - now) + 1)
    return ApiProblem(
        429,
        "Too many requests",
        f"{why}; retry after {retry_after} s",
        slug="rate-limited",
        headers={"Retry-After": str(retry_after)},
    )
