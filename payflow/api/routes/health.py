"""Liveness, readiness and metrics (all behind X-API-Key, as in the seed)."""

from __future__ import annotations

import asyncio

from fastapi import Request
from starlette.responses import Response

from payflow.api.auth import CurrentMerchant
from payflow.api.responses import JsonResponse
from payflow.api.routing import api_router
from payflow.api.schemas import Health, Readiness, problem_responses
from payflow.api.state import ApiState, api_state
from payflow.broker.connection import short_connection

router = api_router(tags=["operations"])
AUTH_PROBLEMS = problem_responses(401, 413, 429)


@router.get("/health", response_model=Health, responses=AUTH_PROBLEMS, summary="Liveness")
async def health(merchant: CurrentMerchant) -> JsonResponse:
    """The process serves requests; dependencies are not checked here."""
    return JsonResponse({"status": "ok"})


async def _check_postgres(state: ApiState) -> None:
    async with state.pool.acquire() as conn:
        await conn.fetchval("SELECT 1")


async def _check_redis(state: ApiState) -> None:
    await state.redis.ping()


async def _check_rabbitmq(state: ApiState) -> None:
    async with short_connection(
        state.settings.broker_urls(), state.settings.api_ready_timeout_seconds
    ):
        pass


@router.get(
    "/ready",
    response_model=Readiness,
    responses={503: {"description": "A dependency is down", "model": Readiness}, **AUTH_PROBLEMS},
    summary="Readiness: PostgreSQL, Redis and RabbitMQ",
)
async def ready(request: Request, merchant: CurrentMerchant) -> JsonResponse:
    """200 when every dependency answers within the timeout, 503 naming the failures."""
    state = api_state(request)
    timeout = state.settings.api_ready_timeout_seconds
    checks = {"postgres": _check_postgres, "redis": _check_redis, "rabbitmq": _check_rabbitmq}
    results: dict[str, str] = {}
    for name, check in checks.items():
        try:
            await asyncio.wait_for(check(state), timeout)
            results[name] = "ok"
        except Exception as error:  # any failure means "not ready", reported by name
            results[name] = f"error: {type(error).__name__}"
    ok = all(value == "ok" for value in results.values())
    return JsonResponse(
        {"status": "ready" if ok else "not_ready", "checks": results},
        status_code=200 if ok else 503,
    )


@router.get(
    "/metrics",
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "Metrics"},
        **AUTH_PROBLEMS,
    },
    response_class=Response,
    summary="Prometheus metrics",
)
async def metrics(request: Request, merchant: CurrentMerchant) -> Response:
    """Request counts and latencies by route template and status, and every family of
    `payflow.metrics` (docs/operations.md#metrics); cached values only, never waits on
    a dependency."""
    body = api_state(request).metrics.render()
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
