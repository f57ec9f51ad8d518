"""Operator-only endpoints (admin key)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query, Request
from pydantic import BeforeValidator

from payflow.api.auth import AdminMerchant
from payflow.api.checks import QueryBool, decimal_integer_text
from payflow.api.cursors import decode_cursor, encode_cursor, listing_digest
from payflow.api.db import connection
from payflow.api.responses import JsonResponse, iso
from payflow.api.routing import api_router
from payflow.api.schemas import (
    DeadLetterOut,
    DeadLetterPage,
    ReplayOut,
    UnmatchedPage,
    problem_responses,
)
from payflow.api.state import api_state
from payflow.dlq import DeadLetter, get_dead_letter, list_dead_letters
from payflow.ingress.service import list_unmatched
from payflow.ops.dlq_replay import replay_dead_letter

DlqId = Annotated[int, BeforeValidator(decimal_integer_text), Path(ge=1, le=2**63 - 1)]

router = api_router(prefix="/api/v1/admin", tags=["operations"])


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
    limit: Annotated[int, BeforeValidator(decimal_integer_text), Query(ge=1, le=200)] = 50,
) -> JsonResponse:
    """Events kept for review instead of being refused (so providers stop retrying)."""
    state = api_state(request)
    listing = listing_digest("unmatched-events")
    after_at, after_id = decode_cursor(cursor, listing, id_kind=str) if cursor else (None, None)
    async with connection(state.pool) as conn:
        rows = await list_unmatched(conn, after_at, after_id, limit + 1)
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
            "detail": row["detail"],
            "position": row["position"],
        }
        for row in page
    ]
    next_cursor = (
        encode_cursor(page[-1]["created_at"], page[-1]["event_id"], listing)
        if len(rows) > limit
        else None
    )
    return JsonResponse({"items": items, "next_cursor": next_cursor})


def _dead_letter(row: DeadLetter) -> dict[str, object]:
    return {
        "id": row.id,
        "source": row.source,
        "subject_id": row.subject_id,
        "payload": row.payload,
        "error": row.error,
        "attempt": row.attempt,
        "created_at": iso(row.created_at),
        "resolved_at": iso(row.resolved_at) if row.resolved_at else None,
        "resolved_by": row.resolved_by,
        "resolution": row.resolution,
    }


@router.get(
    "/dlq",
    response_model=DeadLetterPage,
    responses=problem_responses(401, 403, 422, 429, 503),
    summary="Dead letters, newest first; unresolved only unless asked (admin key)",
)
async def dead_letters(
    request: Request,
    merchant: AdminMerchant,
    include_resolved: QueryBool = False,
    limit: Annotated[int, BeforeValidator(decimal_integer_text), Query(ge=1, le=200)] = 50,
) -> JsonResponse:
    """Every failed attempt that exhausted its retries, for an operator to inspect."""
    state = api_state(request)
    rows = await list_dead_letters(state.pool, include_resolved=include_resolved, limit=limit)
    return JsonResponse({"items": [_dead_letter(row) for row in rows]})


@router.get(
    "/dlq/{dlq_id}",
    response_model=DeadLetterOut,
    responses=problem_responses(401, 403, 404, 422, 429, 503),
    summary="One dead letter with its payload (admin key)",
)
async def dead_letter(request: Request, merchant: AdminMerchant, dlq_id: DlqId) -> JsonResponse:
    """One DLQ row; 404 when it does not exist."""
    row = await get_dead_letter(api_state(request).pool, dlq_id)
    return JsonResponse(_dead_letter(row))


@router.post(
    "/dlq/{dlq_id}/replay",
    response_model=ReplayOut,
    responses=problem_responses(401, 403, 404, 409, 422, 429, 503),
    summary="Replay one dead letter by hand, audited (admin key)",
)
async def replay(request: Request, merchant: AdminMerchant, dlq_id: DlqId) -> JsonResponse:
    """Manual, audited replay under the subject's original idempotency: it can never
    apply twice. The authenticated admin is recorded as `resolved_by`; a second replay
    of the same row answers 409."""
    state = api_state(request)
    operator = f"api:{merchant.name}:{merchant.id}"
    resolution = await replay_dead_letter(
        state.pool, state.settings.database, dlq_id, operator=operator
    )
    return JsonResponse({"id": dlq_id, "resolution": resolution, "resolved_by": operator})
