"""Per-app runtime state, built in the lifespan and reached through `request.app.state`."""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg
from redis.asyncio import Redis
from starlette.requests import Request

from payflow.config import Settings
from payflow.outbox.waker import RelayWaker

from .metrics import Metrics


@dataclass(slots=True)
class ApiState:
    """Everything a request handler needs; nothing here exists at import time."""

    settings: Settings
    pool: asyncpg.Pool
    redis: Redis
    metrics: Metrics
    provider_secret: bytes
    waker: RelayWaker  # after-commit relay wake-ups of the payments created here
    auth_cache: dict[str, tuple[object, float]] = field(default_factory=dict)


def api_state(request: Request) -> ApiState:
    """The state of the app serving `request`."""
    state: ApiState = request.app.state.api
    return state
