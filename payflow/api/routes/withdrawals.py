"""`POST /api/v1/accounts/{id}/withdrawals`: the HTTP side of a withdrawal.

The route parses and authorises; `payflow.ledger.withdrawals` keeps the key's
idempotency, refuses a key that already made the other kind of withdrawal and records
the ledger event (or, with `to_address`, the on-chain payout of `routes/payouts.py`).
The route opens the transaction, one per attempt.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any
from uuid import UUID

import asyncpg
from fastapi import Depends, Header, Request
from pydantic import BeforeValidator

from payflow.api.auth import CurrentMerchant, Merchant
from payflow.api.checks import Uuid
from payflow.api.db import connection
from payflow.api.errors import ApiProblem, FieldError
from payflow.api.headers import idempotency_key_once, strip_ows
from payflow.api.responses import JsonResponse
from payflow.api.routes.accounts import owned_account
from payflow.api.routes.payouts import record_payout
from payflow.api.routing import api_router
from payflow.api.schemas import (
    COMMON_PROBLEMS,
    PayoutView,
    WithdrawalAccepted,
    WithdrawalCreate,
    problem_responses,
)
from payflow.api.state import api_state
from payflow.chain.payouts.holds import payout_by_key
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.errors import BadInput
from payflow.idempotency.records import KEY_PATTERN, is_key_race, request_hash
from payflow.ledger.accounts import asset_scale
from payflow.ledger.withdrawals import (
    WITHDRAWAL_SCOPE,
    PlacePayout,
    WithdrawalRequest,
    replay_withdrawal,
    request_withdrawal,
)
from payflow.money import parse_amount

router = api_router(prefix="/api/v1", tags=["accounts"])
# The docstring of `withdraw` is its OpenAPI description: `_record_withdrawal` is in
# `payflow.ledger.withdrawals`.


async def account_to_debit(conn: asyncpg.Connection, account_id: UUID, merchant: Merchant) -> Any:
    """The account money leaves on `merchant`'s request (a withdrawal or a payout): only
    its owner's key moves money out of it. An admin key reads every account but debits
    only its own: another merchant's account answers 403 (`ApiProblem`) to it, and
    `NotFound` to a merchant key, exactly like an unknown id."""
    row = await owned_account(conn, account_id, merchant)
    if row["merchant_id"] != merchant.id:
        raise ApiProblem(
            403,
            "Forbidden",
            "an admin key reads every account, but money leaves an account only on its owner's key",
            slug="forbidden",
        )
    return row


def _payout_placer(
    settings: Settings, merchant: Merchant, key: str, body: WithdrawalCreate, trace_id: str
) -> PlacePayout | None:
    """The on-chain branch for a body with `to_address` (its refusals as problems), else None."""
    if body.to_address is None:
        return None

    async def place(
        conn: asyncpg.Connection, account: Any, amount: Decimal
    ) -> tuple[dict[str, Any], bool]:
        return await record_payout(
            conn,
            settings.payouts,
            merchant=merchant,
            key=key,
            account=account,
            amount=amount,
            body=body,
            trace_id=trace_id,
        )

    return place


@router.post(
    "/accounts/{account_id}/withdrawals",
    status_code=202,
    response_model=WithdrawalAccepted | PayoutView,
    responses=problem_responses(400, 415, 404, 409, *COMMON_PROBLEMS),
    summary="Request a withdrawal (idempotent); with `to_address`, an on-chain payout",
    dependencies=[Depends(idempotency_key_once)],
)
async def withdraw(
    request: Request,
    account_id: Uuid,
    body: WithdrawalCreate,
    merchant: CurrentMerchant,
    idempotency_key_header: Annotated[
        str, BeforeValidator(strip_ows), Header(alias="Idempotency-Key", pattern=KEY_PATTERN)
    ],
) -> JsonResponse:
    """Record a pending withdrawal event and its outbox row; funds are checked at posting.

    A retry is answered from the key's stored record while it is kept, and from the
    event row after that (see `_record_withdrawal`).
    """
    state = api_state(request)
    key = idempotency_key_header
    # exclude_none: a ledger-only withdrawal hashes exactly as before payouts existed
    fields = body.model_dump(exclude_none=True)
    req_hash = request_hash(WITHDRAWAL_SCOPE, {"account_id": str(account_id), **fields})
    trace_id: str = request.state.trace_id
    place_payout = _payout_placer(state.settings, merchant, key, body, trace_id)
    for attempt in (1, 2):
        try:
            async with connection(state.pool) as conn, transaction(conn, state.settings):
                stored = await replay_withdrawal(conn, merchant.id, key, req_hash)
                if stored is None:
                    account = await account_to_debit(conn, account_id, merchant)
                    scale = await asset_scale(conn, account["asset"])
                    try:
                        amount = parse_amount(body.amount, scale)
                    except BadInput as error:
                        raise FieldError("body.amount", str(error)) from None
                    withdrawal = WithdrawalRequest(
                        merchant_id=merchant.id,
                        idempotency_key=key,
                        request_hash=req_hash,
                        account=account,
                        amount=amount,
                        scale=scale,
                        trace_id=trace_id,
                    )
                    stored = await request_withdrawal(
                        conn, withdrawal, payout_by_key=payout_by_key, place_payout=place_payout
                    )
            return JsonResponse(stored.body, status_code=stored.status)
        except Exception as exc:
            if attempt == 1 and is_key_race(exc):
                continue
            raise
    raise AssertionError("unreachable")  # pragma: no cover
