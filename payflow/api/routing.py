"""The route class every API and console router uses: JSON bodies decoded by
`payflow.wirejson.loads_exact` (orjson where exact, else the depth-bounded standard
decoder).

FastAPI decodes a JSON body with `Request.json()`, which is the standard library's
unbounded decoder; here it is replaced, so a deeply nested body is a 422 like any other
body that is not JSON, in every process whatever its recursion limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from payflow.api.errors import ApiProblem, FieldError
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


def refuse_repeated_query_parameters(request: Request) -> None:
    """Raise `FieldError` (422 on `query.<name>`) when a query parameter comes more than
    once: every API parameter takes one value, and which copy a framework keeps is not
    the client's choice to leave open (found by a new user: `limit=1&limit=2` used one of
    them silently). The same rule as for headers that must come once."""
    seen: set[str] = set()
    for name, _value in request.query_params.multi_items():
        if name in seen:
            raise FieldError(f"query.{name}", "must be given once")
        seen.add(name)


# The provider webhook reads its signed bytes whatever the label: a provider cannot be
# asked to change its headers, and the signature, not the label, decides.
ANY_CONTENT_TYPE = frozenset({"/api/v1/webhooks/provider"})


def refuse_a_body_that_is_not_json(request: Request) -> None:
    """Raise the 415 problem when a request's body is labelled as something other than JSON
    in UTF-8 (`application/json` or `application/*+json`, charset absent or utf-8):
    FastAPI would hand such a body to the model as bytes and answer a puzzling 422
    "Input should be a valid dictionary" (found by a new user). A request without
    Content-Type is read as JSON, as before."""
    labels = request.headers.getlist("content-type")
    if not labels or request.url.path in ANY_CONTENT_TYPE:
        return
    label = labels[0] if len(labels) == 1 else "several labels"  # no copy is judged first
    sends_body = request.headers.get("content-length", "0") != "0" or (
        "transfer-encoding" in request.headers
    )
    if request.method not in ("POST", "PUT", "PATCH") or not sends_body:
        return
    media, _, params = label.partition(";")
    media = media.strip().lower()
    kind, _, subtype = media.partition("/")
    charset = None
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    is_json = kind == "application" and (subtype == "json" or subtype.endswith("+json"))
    if is_json and charset in (None, "utf-8", "utf8"):
        return
    raise ApiProblem(
        415,
        "Unsupported media type",
        "the body must be JSON in UTF-8: send Content-Type: application/json",
        slug="unsupported-media-type",
    )


def api_router(**options: Any) -> APIRouter:
    """`APIRouter(**options)` with `BoundedJsonRoute`; every payflow router is made here."""
    return APIRouter(route_class=BoundedJsonRoute, **options)
