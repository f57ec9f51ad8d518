"""Fast JSON responses and RFC 9457 problem documents."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import orjson
from starlette.responses import Response

from payflow.errors import BadInput
from payflow.money import format_amount, format_at_scale, scale_of

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


def wire_amount(amount: Decimal, asset: str) -> str:
    """An amount as a string with exactly the asset's number of decimals.

    Rendered by `money.format_at_scale`, which is exact and context-free: no stored
    value (up to NUMERIC(78,18) balances) can make a read fail.
    An asset unknown to this build is shown plainly, without trailing zeros.
    """
    try:
        scale = scale_of(asset)
    except BadInput:
        return format_amount(amount)
    return format_at_scale(amount, scale)
