"""The API's app factory: `create_api()` builds nothing until the lifespan starts. The
served app (`payflow.app.create_app`) mounts the console on it."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from redis.asyncio import Redis

from payflow.config import Settings, load_settings
from payflow.db.pool import create_pool
from payflow.db.tx import transaction
from payflow.gauges import refreshing_state
from payflow.ingress.signature import require_secret
from payflow.observability import configure_logging, log
from payflow.outbox.waker import RelayWaker

from .auth import authenticate, ensure_bootstrap_merchants
from .db import connection
from .errors import install_exception_handler
from .head import HeadAsGet
from .metrics import Metrics
from .middleware import RequestMiddleware
from .routes import (
    accounts,
    admin,
    api_keys,
    events,
    health,
    ingress,
    payments,
    payouts,
    statements,
    webhook_deliveries,
    webhook_endpoints,
    withdrawals,
)
from .routing import BoundedJsonRoute
from .schemas import problem_responses
from .state import ApiState


def create_api(settings: Settings | None = None) -> FastAPI:
    """Build the FastAPI app of the HTTP API (no console: `payflow.app` mounts it).
    Pool and Redis client are opened in the lifespan.

    Invariant: importing this module or calling this function opens no connection;
    a missing or short provider secret fails here, before serving anything.
    """
    settings = settings or load_settings()
    provider_secret = require_secret(settings.ingress)
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings.observability)
        # The API only uses transaction-scoped state, so releases skip the reset query.
        pool = await create_pool(settings.database, reset_session=False)
        redis = Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=2)
        waker = RelayWaker(pool)
        try:
            async with connection(pool) as conn, transaction(conn, settings):
                await ensure_bootstrap_merchants(conn, settings.api)
            app.state.api = ApiState(settings, pool, redis, metrics, provider_secret, waker)
            # Everything built so far lives as long as the process: keep it out of the
            # cyclic GC's generations, so collections stay short under load.
            gc.freeze()
            log.info("payflow.api.started")
            # State gauges for /metrics; inside `payflow up` the roles' refresher runs.
            async with refreshing_state(
                pool, settings.observability, database=settings.database, broker=settings.broker
            ):
                yield
        finally:
            await waker.close()
            await redis.aclose()
            await pool.close()

    app = FastAPI(
        title="payflow",
        version="1.0.0",
        description="Merchant payments, signed provider webhooks, accounts and withdrawals.",
        lifespan=lifespan,
    )
    app.router.route_class = BoundedJsonRoute  # routes added on the app itself too
    # No redirect from `/path/` to `/path`: Starlette builds that Location from the
    # request's Host header (a redirect to any host the client names), before auth.
    app.router.redirect_slashes = False
    install_exception_handler(app)
    for module in (
        payments,
        accounts,
        statements,
        withdrawals,
        events,
        payouts,
        webhook_endpoints,
        webhook_deliveries,
        ingress,
        admin,
        api_keys,
        health,
    ):
        document_read_key_refusal(module.router)
        app.include_router(module.router)
    app.add_middleware(HeadAsGet)  # inside RequestMiddleware: logs and metrics say HEAD
    app.add_middleware(
        RequestMiddleware,
        max_body_bytes=settings.max_body_bytes,
        metrics=metrics,
        path_limits={ingress.PROVIDER_WEBHOOK_PATH: settings.provider_max_body_bytes},
    )
    _document_settings(app, settings)
    return app


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def document_read_key_refusal(router: APIRouter) -> None:
    """Give every keyed route that writes its 403 in /openapi.json: `authenticate`
    refuses a `read` key on any method but GET and HEAD, so the 403 is an answer of
    every such route, whether or not its module listed it (routes added later too).
    Routers it includes are walked too, with their include's dependencies."""
    pending: list[tuple[bool, Any]] = [(False, route) for route in router.routes]
    while pending:
        keyed, route = pending.pop()
        included = getattr(route, "original_router", None)
        if included is not None:
            deps = route.include_context.dependencies
            keyed = keyed or any(d.dependency is authenticate for d in deps)
            pending.extend((keyed, r) for r in included.routes)
            continue
        if not isinstance(route, APIRoute) or not ((route.methods or set()) & WRITE_METHODS):
            continue
        if (keyed or _depends_on(route.dependant, authenticate)) and 403 not in route.responses:
            route.responses[403] = problem_responses(403)[403]


def _depends_on(dependant: Dependant, call: Any) -> bool:
    """Whether `call` is among the dependencies of `dependant`, at any depth."""
    pending = list(dependant.dependencies)
    while pending:
        dep = pending.pop()
        if dep.call is call:
            return True
        pending.extend(dep.dependencies)
    return False


def _document_settings(app: FastAPI, settings: Settings) -> None:
    """Put the configured currencies and signature header into /openapi.json."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            payment = document["components"]["schemas"]["PaymentCreate"]["properties"]
            payment["currency"]["enum"] = list(settings.fiat_currencies)
            ingress = document["paths"]["/api/v1/webhooks/provider"]["post"]
            for parameter in ingress["parameters"]:
                if parameter["in"] == "header":
                    parameter["name"] = settings.provider_signature_header
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]
