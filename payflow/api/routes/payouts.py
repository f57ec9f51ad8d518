"""On-chain payouts over HTTP: the payout branch of
`POST /api/v1/accounts/{id}/withdrawals` (a body with `to_address`) and
`GET /api/v1/payouts/{id}`."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import asyncpg
from fastapi import Request

from payflow.api.auth import CurrentMerchant, Merchant
from payflow.api.checks import Uuid
from payflow.api.db import connection
from payflow.api.errors import ApiProblem, FieldError
from payflow.api.responses import JsonResponse, iso, wire_amount
from payflow.api.routing import api_router
from payflow.api.schemas import COMMON_PROBLEMS, PayoutView, WithdrawalCreate, problem_responses
from payflow.api.state import api_state
from payflow.chain.payouts.holds import (
    PayoutKeyReused,
    PayoutRefused,
    payout_scoped,
    place_payout,
)
from payflow.config import PayoutSettings
from payflow.errors import AccountFrozen, InsufficientFunds, NotFound
from payflow.idempotency.records import IdempotencyKeyReused

router = api_router(prefix="/api/v1", tags=["payouts"])


def payout_view(row: Any) -> dict[str, Any]:
    """The wire form of a payouts row (amounts as strings at the asset's scale)."""
    asset = row["asset"]
    return {
        "payout_id": str(row["id"]),
        "account_id": str(row["account_id"]),
        "asset": asset,
        "amount": wire_amount(row["amount"], asset),
        "fee_held": wire_amount(row["fee_hold"], asset),
        "fee_paid": None if row["fee_paid"] is None else wire_amount(row["fee_paid"], asset),
        "chain": row["chain"],
        "to_address": row["to_address"],
        "status": row["status"],
        "tx_hash": row["landed_tx_hash"],
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
    }


async def record_payout(
    conn: asyncpg.Connection,
    settings: PayoutSettings,
    *,
    merchant: Merchant,
    key: str,
    account: Any,
    amount: Decimal,
    body: WithdrawalCreate,
    trace_id: str,
) -> tuple[dict[str, Any], bool]:
    """Hold and record a payout in the caller's transaction; (wire body, created).

    Insufficient available funds answer 409 `insufficient-funds` at once (nothing held),
    a frozen account 409 `account-frozen`, an unusable chain/asset/amount 422.
    """
    assert body.to_address is not None
    try:
        row, created = await place_payout(
            conn,
            settings,
            merchant_id=merchant.id,
            idempotency_key=key,
            account=account,
            amount=amount,
            to_address=body.to_address.lower(),
            chain=body.chain or settings.payout_chain,
            trace_id=trace_id,
        )
    except PayoutRefused as error:
        raise FieldError(error.field, error.message) from None
    except PayoutKeyReused as error:
        raise IdempotencyKeyReused(str(error)) from None
    except InsufficientFunds as error:
        raise ApiProblem(409, "Insufficient funds", str(error), slug="insufficient-funds") from None
    except AccountFrozen as error:
        raise ApiProblem(409, "Account frozen", str(error), slug="account-frozen") from None
    return payout_view(row), created


@router.get(
    "/payouts/{payout_id}",
    response_model=PayoutView,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="Read a payout: its state, transaction hash and fees",
)
async def read_payout(request: Request, payout_id: Uuid, merchant: CurrentMerchant) -> JsonResponse:
    """Other merchants' payouts answer 404."""
    state = api_state(request)
    async with connection(state.pool) as conn:
        row = await payout_scoped(conn, payout_id, merchant.id, merchant.is_admin)
    if row is None:
        raise NotFound(f"payout {payout_id} does not exist")
    return JsonResponse(payout_view(row))
