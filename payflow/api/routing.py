"""The route class every API and console router uses: JSON bodies decoded by
`payflow.wirejson.loads_exact` (orjson where exact, else the depth-bounded standard
decoder).

FastAPI decodes a JSON body with `Request.json()`, which is the standard library's
unbounded decoder; here it is replaced, so a deeply nested body is a 422 like any other
body that is not JSON, in every process whatever its recursion limit. On `/api/` paths
the route first applies `payflow.api.request_rules` (each query parameter once, a body
labelled as JSON).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from payflow.api.request_rules import (
    refuse_a_body_that_is_not_json,
    refuse_repeated_query_parameters,
)
from payflow.wirejson import loads_exact


class BoundedJsonRequest(Request):
    """A request whose `json()` is `loads_exact`: the standard decoder's values (floats,
    `NaN` literals, wide integers as `int`), bounded in depth.

    Raises `json.JSONDecodeError`, which FastAPI answers 422 `json_invalid`; so is a body
    that is not UTF-8 (RFC 8259 §8.1), which FastAPI would otherwise answer with a bare
    400 "There was an error parsing the body"."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = loads_exact(body)
            except UnicodeDecodeError as exc:
                raise json.JSONDecodeError(
                    f"not UTF-8 (byte {exc.start}: {exc.reason})", "", 0
                ) from None
        return self._json


class BoundedJsonRoute(APIRoute):
    """An `APIRoute` whose handler sees a `BoundedJsonRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def bounded(request: Request) -> Response:
            if request.url.path.startswith("/api/"):
                refuse_repeated_query_parameters(request)
                refuse_a_body_that_is_not_json(request)
            return await handler(BoundedJsonRequest(request.scope, request.receive))

        return bounded


def api_router(**options: Any) -> APIRouter:
    """`APIRouter(**options)` with `BoundedJsonRoute`; every payflow router is made here."""
    return APIRouter(route_class=BoundedJsonRoute, **options)
