"""Accounts, their ledger entries, deposit addresses, withdrawals and event outcomes."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any
from uuid import UUID

import asyncpg
from fastapi import Depends, Header, Path, Query, Request
from pydantic import BeforeValidator

from payflow.api.auth import SQL, CurrentMerchant, Merchant, require_admin
from payflow.api.db import connection
from payflow.api.errors import ApiProblem, FieldError
from payflow.api.headers import idempotency_key_once, strip_ows
from payflow.api.responses import JsonResponse, iso, wire_amount
from payflow.api.routes.derived import add_derived_address, ensure_chain_carries
from payflow.api.routes.payouts import record_payout
from payflow.api.routing import api_router
from payflow.api.schemas import (
    COMMON_PROBLEMS,
    AccountCreate,
    AccountView,
    DepositAddressCreate,
    DepositAddressView,
    DepositReportView,
    EventView,
    LedgerPage,
    PayoutView,
    WithdrawalAccepted,
    WithdrawalCreate,
    problem_responses,
)
from payflow.api.state import api_state
from payflow.chain.deposits import pending_incoming
from payflow.chain.payouts.holds import SQL as PAYOUT_SQL
from payflow.db.tx import transaction
from payflow.errors import BadInput, Conflict, NotFound
from payflow.idempotency import idempotency_key
from payflow.ingress.payloads import normalise_address
from payflow.ingress.service import LEDGER_EVENT_TOPIC, assign_address
from payflow.ledger.accounts import asset_scale, record_event
from payflow.ledger.limits import LimitKind, check_limit
from payflow.ledger.posting import posting_key
from payflow.ledger.records import EventType
from payflow.ledger.states import SQL as LEDGER_SQL
from payflow.money import add, negate, parse_amount
from payflow.observability import log
from payflow.outbox.writer import enqueue
from payflow.payments.idempotency import (
    KEY_PATTERN,
    IdempotencyKeyReused,
    StoredResponse,
    is_key_race,
    lookup,
    request_hash,
    store,
)

router = api_router(prefix="/api/v1", tags=["accounts"])
WITHDRAWAL_SCOPE = "accounts.withdraw"
EventId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[!-~]+$")]


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


async def _owned_account(conn: asyncpg.Connection, account_id: UUID, merchant: Merchant) -> Any:
    """The account as `merchant` may read it (an admin key reads every account);
    `NotFound` for an unknown id or another merchant's account."""
    row = await conn.fetchrow(SQL["get_account_scoped"], account_id, merchant.id, merchant.is_admin)
    if row is None:
        raise NotFound(f"account {account_id} does not exist")
    return row


async def _account_to_debit(conn: asyncpg.Connection, account_id: UUID, merchant: Merchant) -> Any:
    """The account money leaves on `merchant`'s request (a withdrawal or a payout): only
    its owner's key moves money out of it. An admin key reads every account but debits
    only its own: another merchant's account answers 403 (`ApiProblem`) to it, and
    `NotFound` to a merchant key, exactly like an unknown id."""
    row = await _owned_account(conn, account_id, merchant)
    if row["merchant_id"] != merchant.id:
        raise ApiProblem(
            403,
            "Forbidden",
            "an admin key reads every account, but money leaves an account only on its owner's key",
            slug="forbidden",
        )
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


@router.get(
    "/accounts/{account_id}",
    response_model=AccountView,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="Read an account with its balance",
)
async def read_account(
    request: Request, account_id: UUID, merchant: CurrentMerchant
) -> JsonResponse:
    """Other merchants' accounts answer 404 (admins see every account)."""
    state = api_state(request)
    async with connection(state.pool) as conn:
        row = await _owned_account(conn, account_id, merchant)
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
    account_id: UUID,
    merchant: CurrentMerchant,
    cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> JsonResponse:
    """The cursor is the last entry id of the previous page; entries are append-only."""
    state = api_state(request)
    async with connection(state.pool) as conn:
        account = await _owned_account(conn, account_id, merchant)
        rows = await conn.fetch(
            LEDGER_SQL["ledger_entries"], account_id, int(cursor) if cursor else None, limit + 1
        )
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
    account_id: UUID,
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
        account = await _owned_account(conn, account_id, merchant)
        await require_admin(merchant)
        address = normalise_address(body.address, "body.address")  # EVM-shaped: schemas
        await ensure_chain_carries(conn, body.chain, account["asset"])
        row = await assign_address(conn, body.chain, address, account_id)
    return JsonResponse(
        {"chain": row["chain"], "address": row["address"], "account_id": str(row["account_id"])},
        status_code=201,
    )


def withdrawal_event_id(merchant_id: UUID, key: str) -> str:
    """Deterministic per merchant and Idempotency-Key, so a retry never makes a second event."""
    return "wd:" + idempotency_key("withdrawal", str(merchant_id), key)


class DerivedEventTaken(Conflict):
    """A derived event id (`wd:`) exists although the key's lock saw none: stop the request."""


def _withdrawal_body(event: Any, asset: str) -> dict[str, Any]:
    """The 202 answer, rebuilt from the payment event row (its current status)."""
    return {
        "event_id": event["event_id"],
        "account_id": str(event["account_id"]),
        "amount": wire_amount(event["amount"], asset),
        "status": event["status"],
    }


async def _record_withdrawal(
    conn: asyncpg.Connection,
    *,
    event_id: str,
    account: Any,
    amount: Decimal,
    scale: int,
    trace_id: str,
) -> tuple[dict[str, Any], bool]:
    """Record the withdrawal event and its `ledger.event` outbox row, or judge the one made.

    Runs under the Idempotency-Key's advisory lock (taken by `lookup`) after the key's
    record was found missing, so the event row is the last word: an event with the
    derived id that matches the request (account, amount at the asset's scale, type)
    is answered from its row with `created` False and nothing written; one that differs
    raises `IdempotencyKeyReused` (409). An insert that inserts nothing raises
    `DerivedEventTaken`: the transaction stops rather than announce or echo anything.
    Returns (the wire body, created).
    """
    asset: str = account["asset"]
    existing = await conn.fetchrow(LEDGER_SQL["get_event"], event_id)
    if existing is not None:
        same = (
            existing["account_id"] == account["id"]
            and existing["amount"] == amount
            and existing["event_type"] == EventType.WITHDRAWAL.value
        )
        if not same:
            raise IdempotencyKeyReused(
                "this Idempotency-Key was already used for a withdrawal with different details"
            )
        return _withdrawal_body(existing, asset), False
    inserted = await record_event(
        conn,
        event_id=event_id,
        account_id=account["id"],
        amount=format(amount, "f"),
        event_type=EventType.WITHDRAWAL,
        scale=scale,
        trace_id=trace_id,
    )
    if not inserted:
        log.error("payflow.withdrawal.derived_id_taken", event_id=event_id)
        raise DerivedEventTaken("the request conflicts with an existing event; nothing was written")
    await enqueue(conn, LEDGER_EVENT_TOPIC, {"version": 1, "event_id": event_id}, trace_id)
    body = {
        "event_id": event_id,
        "account_id": str(account["id"]),
        "amount": wire_amount(amount, asset),
        "status": "pending",
    }
    return body, True


async def _refuse_the_other_kind(
    conn: asyncpg.Connection,
    merchant: Merchant,
    key: str,
    event_id: str,
    body: WithdrawalCreate,
) -> None:
    """Under the key's advisory lock, after its record was found missing: one
    Idempotency-Key names one withdrawal, ledger-only (`wd:` event) or on-chain (a
    `payouts` row), never one of each. Raises `IdempotencyKeyReused` (409) when the key
    already made the other kind (found by a tester: once the key's record had expired,
    the same key made a ledger withdrawal and then a payout, and money left twice)."""
    if body.to_address is None:
        taken = await conn.fetchval(PAYOUT_SQL["payout_by_key"], merchant.id, key)
        kind = "an on-chain payout"
    else:
        taken = await conn.fetchval(LEDGER_SQL["get_event"], event_id)
        kind = "a ledger withdrawal"
    if taken is not None:
        raise IdempotencyKeyReused(f"this Idempotency-Key was already used for {kind}")


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
    account_id: UUID,
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
    event_id = withdrawal_event_id(merchant.id, key)
    trace_id: str = request.state.trace_id
    for attempt in (1, 2):
        try:
            async with connection(state.pool) as conn, transaction(conn, state.settings):
                stored = await lookup(conn, merchant.id, WITHDRAWAL_SCOPE, key, req_hash)
                if stored is not None:
                    return JsonResponse(stored.body, status_code=stored.status)
                account = await _account_to_debit(conn, account_id, merchant)
                scale = await asset_scale(conn, account["asset"])
                try:
                    amount = parse_amount(body.amount, scale)
                except BadInput as error:
                    raise FieldError("body.amount", str(error)) from None
                await check_limit(
                    conn, account["asset"], LimitKind.WITHDRAWAL, amount, field="body.amount"
                )
                await _refuse_the_other_kind(conn, merchant, key, event_id, body)
                if body.to_address is not None:  # an on-chain payout (issue 11)
                    answer, created = await record_payout(
                        conn,
                        state.settings.payouts,
                        merchant=merchant,
                        key=key,
                        account=account,
                        amount=amount,
                        body=body,
                        trace_id=trace_id,
                    )
                else:  # the provider-reported, ledger-only withdrawal
                    answer, created = await _record_withdrawal(
                        conn,
                        event_id=event_id,
                        account=account,
                        amount=amount,
                        scale=scale,
                        trace_id=trace_id,
                    )
                if created:
                    response = StoredResponse(202, answer)
                    await store(conn, merchant.id, WITHDRAWAL_SCOPE, key, req_hash, response)
            return JsonResponse(answer, status_code=202)
        except Exception as exc:
            if attempt == 1 and is_key_race(exc):
                continue
            raise
    raise AssertionError("unreachable")  # pragma: no cover


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
