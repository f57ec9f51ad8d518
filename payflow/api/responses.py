"""Fast JSON responses and RFC 9457 problem documents."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.responses import Response

from payflow.money import wire_amount

__all__ = ["JsonResponse", "ProblemResponse", "iso", "problem", "wire_amount"]

PROBLEM_MEDIA_TYPE = "application/problem+json"


class JsonResponse(Response):
    """`application/json` rendered by orjson; payloads hold strings for every amount."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class ProblemResponse(JsonResponse):
    """An RFC 9457 problem document."""

    media_type = PROBLEM_MEDIA_TYPE


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    type_: str = "about:blank",
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> ProblemResponse:
    """Build a problem+json response; `extra` members (such as `errors`) are added as is."""
    body: dict[str, Any] = {"type": type_, "title": title, "status": status, "detail": detail}
    body.update(extra)
    return ProblemResponse(body, status_code=status, headers=headers)


def iso(moment: datetime | None) -> str | None:
    """A timestamp on the wire: UTC, microseconds, `Z` suffix (as SQL renders it too)."""
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
