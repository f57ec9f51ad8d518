"""`GET /api/v1/events/{id}`: a payment event and its posting outcome, or a provider's
deposit report."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Request

from payflow.api.auth import SQL, CurrentMerchant
from payflow.api.db import connection
from payflow.api.responses import JsonResponse, iso, wire_amount
from payflow.api.routing import api_router
from payflow.api.schemas import COMMON_PROBLEMS, DepositReportView, EventView, problem_responses
from payflow.api.state import api_state
from payflow.errors import NotFound
from payflow.ledger.posting import posting_key

router = api_router(prefix="/api/v1", tags=["accounts"])
EventId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[!-~]+$")]


@router.get(
    "/events/{event_id}",
    response_model=EventView | DepositReportView,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="Read a payment event and its posting outcome (e.g. insufficient_funds), or a"
    " provider's deposit report",
)
async def read_event(
    request: Request, event_id: EventId, merchant: CurrentMerchant
) -> JsonResponse:
    """A ledger event with its posting outcome, or a provider's deposit report (by the id
    the provider webhook answered: `DepositReportView`). Events and reports on other
    merchants' accounts answer 404, like unknown ids."""
    state = api_state(request)
    async with connection(state.pool) as conn:
        row = await conn.fetchrow(
            SQL["get_event_scoped"], event_id, merchant.id, merchant.is_admin, posting_key(event_id)
        )
        report = None
        if row is None:
            report = await conn.fetchrow(
                SQL["get_deposit_report_scoped"], event_id, merchant.id, merchant.is_admin
            )
    if report is not None:
        return JsonResponse(_report_view(report))
    if row is None:
        raise NotFound(f"event {event_id} does not exist")
    return JsonResponse(
        {
            "event_id": row["event_id"],
            "account_id": str(row["account_id"]),
            "event_type": row["event_type"],
            "amount": wire_amount(row["amount"], row["asset"]),
            "asset": row["asset"],
            "status": row["status"],
            "outcome": row["outcome"],
            "last_error": row["last_error"],
            "trace_id": row["trace_id"],
            "created_at": iso(row["created_at"]),
            "updated_at": iso(row["updated_at"]),
        }
    )


def _report_view(row: Any) -> dict[str, Any]:
    """The wire form of a `get_deposit_report_scoped` row (`DepositReportView`)."""
    return {
        "event_id": row["provider_event_id"],
        "event_type": "deposit_report",
        "account_id": str(row["account_id"]),
        "amount": wire_amount(row["amount"], row["asset"]),
        "asset": row["asset"],
        "status": row["status"],
        "reason": row["reason"],
        "transfer_id": row["transfer_id"],
        "deposit_status": row["deposit_status"],
        "credit_event_id": row["credit_event_id"],
        "trace_id": row["trace_id"],
        "created_at": iso(row["created_at"]),
        "decided_at": iso(row["decided_at"]) if row["decided_at"] is not None else None,
    }
