"""Operator-only endpoints (admin key)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from payflow.api.auth import AdminMerchant
from payflow.api.db import connection
from payflow.api.responses import JsonResponse, iso
from payflow.api.routes.payments import decode_cursor, encode_cursor
from payflow.api.schemas import UnmatchedPage, problem_responses
from payflow.api.state import api_state
from payflow.ingress.service import SQL as INGRESS_SQL

router = APIRouter(prefix="/api/v1/admin", tags=["operations"])


@router.get(
    "/unmatched-events",
    response_model=UnmatchedPage,
    responses=problem_responses(401, 403, 422, 429, 503),
    summary="Provider events that matched no deposit address, oldest first (admin key)",
)
async def unmatched_events(
    request: Request,
    merchant: AdminMerchant,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> JsonResponse:
    """Events kept for review instead of being refused (so providers stop retrying)."""
    state = api_state(request)
    after_at, after_id = decode_cursor(cursor, id_kind=str) if cursor else (None, None)
    async with connection(state.pool) as conn:
        rows = await conn.fetch(INGRESS_SQL["list_unmatched"], after_at, after_id, limit + 1)
    page = rows[:limit]
    items = [
        {
            "event_id": row["event_id"],
            "reason": row["reason"],
            "chain": row["chain"],
            "address": row["address"],
            "asset": row["asset"],
            "amount": row["amount"],
            "tx_hash": row["tx_hash"],
            "trace_id": row["trace_id"],
            "created_at": iso(row["created_at"]),
        }
        for row in page
    ]
    next_cursor = (
        encode_cursor(page[-1]["created_at"], page[-1]["event_id"]) if len(rows) > limit else None
    )
    return JsonResponse({"items": items, "next_cursor": next_cursor})
