"""Rules every API request meets before its route runs (`routing.BoundedJsonRoute`
applies them to `/api/` paths): each query parameter given once, and a body labelled as
JSON in UTF-8 when it is labelled at all. Each refusal is a problem+json answer."""

from __future__ import annotations

from email.message import Message

from starlette.requests import Request

from payflow.api.errors import ApiProblem, FieldError

# The parameters that are lists, each copy one more value (the events API's `type`).
REPEATABLE = frozenset({("/api/v1/events", "type")})


def refuse_repeated_query_parameters(request: Request) -> None:
    """Raise `FieldError` (422 on `query.<name>`) when a query parameter comes more than
    once: every API parameter takes one value, and which copy a framework keeps is not
    the client's choice to leave open: a repeated parameter such as `limit=1&limit=2` is
    refused, never silently resolved. The same rule as for headers that must come once.
    A list parameter (`REPEATABLE`: path and name) may come several times."""
    seen: set[str] = set()
    for name, _value in request.query_params.multi_items():
        if name in seen and (request.url.path, name) not in REPEATABLE:
            raise FieldError(f"query.{name}", "must be given once")
        seen.add(name)


# The provider webhook reads its signed bytes whatever the label: a provider cannot be
# asked to change its headers, and the signature, not the label, decides.
ANY_CONTENT_TYPE = frozenset({"/api/v1/webhooks/provider"})


def refuse_a_body_that_is_not_json(request: Request) -> None:
    """Raise the 415 problem when a request's body is labelled as something other than JSON
    in UTF-8 (`application/json` or `application/*+json`, charset absent or utf-8):
    FastAPI would hand such a body to the model as bytes and answer a puzzling 422
    "Input should be a valid dictionary". A request without Content-Type is read as
    JSON."""
    labels = request.headers.getlist("content-type")
    if not labels or request.url.path in ANY_CONTENT_TYPE:
        return
    label = labels[0] if len(labels) == 1 else "several labels"  # no copy is judged first
    sends_body = request.headers.get("content-length", "0") != "0" or (
        "transfer-encoding" in request.headers
    )
    if request.method not in ("POST", "PUT", "PATCH") or not sends_body:
        return
    # Parsed as FastAPI itself reads the label (the standard library's MIME headers).
    parsed = Message()
    parsed["content-type"] = label
    subtype = parsed.get_content_subtype()
    is_json = parsed.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )
    charset = parsed.get_param("charset")
    if is_json and (charset is None or str(charset).lower() in ("utf-8", "utf8")):
        return
    raise ApiProblem(
        415,
        "Unsupported media type",
        "the body must be JSON in UTF-8: send Content-Type: application/json",
        slug="unsupported-media-type",
    )
