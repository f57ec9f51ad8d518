"""Accounts, their ledger entries and deposit addresses.

Withdrawals from an account are in `routes/withdrawals.py`, event outcomes in
`routes/events.py`."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any
from uuid import UUID

import asyncpg
from fastapi import Depends, Header, Query, Request
from pydantic import AwareDatetime, BeforeValidator

from payflow.api.auth import SQL, CurrentMerchant, Merchant, require_admin
from payflow.api.checks import Uuid, decimal_integer_text, rfc3339_text, utc_bound
from payflow.api.db import connection
from payflow.api.errors import FieldError
from payflow.api.headers import idempotency_key_once, strip_ows
from payflow.api.responses import JsonResponse, iso, wire_amount
from payflow.api.routes.derived import add_derived_address, ensure_chain_carries
from payflow.api.routing import api_router
from payflow.api.schemas import (
    COMMON_PROBLEMS,
    AccountBalanceAt,
    AccountCreate,
    AccountView,
    DepositAddressCreate,
    DepositAddressView,
    LedgerPage,
    problem_responses,
)
from payflow.api.state import api_state
from payflow.chain.deposits import pending_incoming
from payflow.db.tx import transaction
from payflow.errors import BadInput, NotFound
from payflow.idempotency.records import KEY_PATTERN
from payflow.ingress.payloads import normalise_address
from payflow.ingress.service import assign_address
from payflow.ledger.accounts import asset_scale, ledger_entries
from payflow.ledger.history import balance_at
from payflow.money import add, negate

router = api_router(prefix="/api/v1", tags=["accounts"])
WITHDRAWAL_SCOPE = "accounts.withdraw"


def account_view(row: Any, pending: Decimal = Decimal(0)) -> dict[str, Any]:
    """The wire form of an accounts row; `pending` is its `pending_incoming` (chain
    deposits seen but not credited: shown, never spendable)."""
    return {
        "account_id": str(row["id"]),
        "asset": row["asset"],
        "balance": wire_amount(row["balance"], row["asset"]),
        "held": wire_amount(row["held"], row["asset"]),
        "available": wire_amount(add(row["balance"], negate(row["held"])), row["asset"]),
        "pending_incoming": wire_amount(pending, row["asset"]),
        "status": row["status"],
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
    }


async def owned_account(conn: asyncpg.Connection, account_id: UUID, merchant: Merchant) -> Any:
    """The account as `merchant` may read it (an admin key reads every account);
    `NotFound` for an unknown id or another merchant's account."""
    row = await conn.fetchrow(SQL["get_account_scoped"], account_id, merchant.id, merchant.is_admin)
    if row is None:
        raise NotFound(f"account {account_id} does not exist")
    return row


@router.post(
    "/accounts",
    status_code=201,
    response_model=AccountView,
    responses=problem_responses(400, 415, *COMMON_PROBLEMS),
    summary="Open an account for an asset",
)
async def create_account(
    request: Request, body: AccountCreate, merchant: CurrentMerchant
) -> JsonResponse:
    """The account belongs to the calling merchant and starts at a zero balance."""
    state = api_state(request)
    async with connection(state.pool) as conn, transaction(conn, state.settings):
        try:
            await asset_scale(conn, body.asset)
        except BadInput as error:
            raise FieldError("body.asset", str(error)) from None
        row = await conn.fetchrow(SQL["create_account"], merchant.id, body.asset)
    return JsonResponse(account_view(row), status_code=201)


def past_instant(value: datetime | None, field: str) -> datetime | None:
    """A timestamp parameter in UTC that is not in the future (a balance there is not
    known yet); `FieldError` (422) naming `field` otherwise."""
    try:
        moment = utc_bound(value)
    except ValueError as error:
        raise FieldError(field, str(error)) from None
    if moment is not None and moment > datetime.now(UTC):
        raise FieldError(field, "must not be in the future")
    return moment


Instant = Annotated[AwareDatetime | None, BeforeValidator(rfc3339_text)]


@router.get(
    "/accounts/{account_id}",
    response_model=AccountView | AccountBalanceAt,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="Read an account with its balance, or its balance at an instant",
)
async def read_account(
    request: Request,
    account_id: Uuid,
    merchant: CurrentMerchant,
    at: Annotated[
        Instant,
        Query(
            description="RFC 3339 with an offset, not in the future: answer the balance at"
            " that instant instead (the sum of the account's legs written at or before it)"
        ),
    ] = None,
) -> JsonResponse:
    """Other merchants' accounts answer 404 (admins see every account)."""
    moment = past_instant(at, "query.at")
    state = api_state(request)
    async with connection(state.pool) as conn:
        row = await owned_account(conn, account_id, merchant)
        if moment is not None:
            balance = await balance_at(conn, account_id, moment)
            return JsonResponse(
                {
                    "account_id": str(row["id"]),
                    "asset": row["asset"],
                    "at": iso(moment),
                    "balance": wire_amount(balance, row["asset"]),
                }
            )
        pending = await pending_incoming(conn, account_id)
    return JsonResponse(account_view(row, pending))


@router.get(
    "/accounts/{account_id}/entries",
    response_model=LedgerPage,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="List an account's ledger entries, newest first",
)
async def list_entries(
    request: Request,
    account_id: Uuid,
    merchant: CurrentMerchant,
    cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$")] = None,
    limit: Annotated[int, BeforeValidator(decimal_integer_text), Query(ge=1, le=200)] = 50,
) -> JsonResponse:
    """The cursor is the last entry id of the previous page; entries are append-only."""
    state = api_state(request)
    async with connection(state.pool) as conn:
        account = await owned_account(conn, account_id, merchant)
        rows = await ledger_entries(conn, account_id, int(cursor) if cursor else None, limit + 1)
    page = rows[:limit]
    asset = account["asset"]
    items = [
        {
            "entry_id": row["id"],
            "amount": wire_amount(row["amount"], asset),
            "event_type": row["event_type"],
            "event_id": row["source_event_id"],
            "balance_after": wire_amount(row["balance_after"], asset),
            "created_at": iso(row["created_at"]),
        }
        for row in page
    ]
    next_cursor = str(page[-1]["id"]) if len(rows) > limit else None
    return JsonResponse({"items": items, "next_cursor": next_cursor})


@router.post(
    "/accounts/{account_id}/deposit-addresses",
    status_code=201,
    response_model=DepositAddressView,
    responses=problem_responses(400, 415, 403, 404, 409, 503, *COMMON_PROBLEMS),
    summary="Derive the account's next deposit address, or import one (admin key)",
    dependencies=[Depends(idempotency_key_once)],
)
async def add_deposit_address(
    request: Request,
    account_id: Uuid,
    body: DepositAddressCreate,
    merchant: CurrentMerchant,
    idempotency_key_header: Annotated[
        str | None,
        BeforeValidator(strip_ows),
        Header(alias="Idempotency-Key", pattern=KEY_PATTERN),
    ] = None,
) -> JsonResponse:
    """Without `address`: derive the next address of `ETH_DEPOSIT_XPUB` for the account
    (its owner; see `add_derived_address`). With `address`: map an address payflow
    issued elsewhere to the account (operators only).

    Ownership is checked first: another merchant's account answers 404 exactly like an
    unknown id, and only on its own account does a merchant key get 403 for an import
    (assigning stays admin-only, because a deposit address credits whatever arrives at
    it). An address is unique per chain: assigning a taken one answers 409.
    """
    if body.address is None:
        return await add_derived_address(
            request, account_id, body, merchant, idempotency_key_header
        )
    state = api_state(request)
    async with connection(state.pool) as conn, transaction(conn, state.settings):
        account = await owned_account(conn, account_id, merchant)
        await require_admin(merchant)
        address = normalise_address(body.address, "body.address")  # EVM-shaped: schemas
        await ensure_chain_carries(conn, body.chain, account["asset"])
        row = await assign_address(conn, body.chain, address, account_id)
    return JsonResponse(
        {"chain": row["chain"], "address": row["address"], "account_id": str(row["account_id"])},
        status_code=201,
    )
