"""Withdrawals requested by a merchant: one Idempotency-Key, one withdrawal, money out once.

`POST /api/v1/accounts/{id}/withdrawals` is two kinds of withdrawal behind one key:

- ledger-only: a pending `withdrawal` payment event (id `wd:<digest>`, derived from the
  merchant and the key) and its `ledger.event` outbox row; the ledger worker debits the
  account when it posts the event, and checks the funds then;
- on-chain (a body with `to_address`): a payout placed by `payflow.chain.payouts`, whose
  hold is taken at once. The caller passes it in as a `PlacePayout`.

Every function here runs in the caller's transaction (`conn` inside
`async with conn.transaction()`), which the caller opens once per attempt:
`replay_withdrawal` takes the key's advisory lock, and `request_withdrawal`, in the
same transaction, does the work and stores the key's response with it. A caller that
sees `is_key_race` (another request stored the key first) retries in a new transaction
and is answered from the stored record.

Amounts are `Decimal` in the asset's units, at most the asset's scale; wire bodies carry
them as strings (`money.wire_amount`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from uuid import UUID

import asyncpg

from payflow.broker.topology import TOPIC_LEDGER_EVENT
from payflow.errors import Conflict
from payflow.idempotency import idempotency_key
from payflow.idempotency.records import IdempotencyKeyReused, StoredResponse, lookup, store
from payflow.ledger.accounts import record_event
from payflow.ledger.limits import LimitKind, check_limit
from payflow.ledger.records import EventType
from payflow.ledger.states import SQL
from payflow.money import wire_amount
from payflow.observability import log
from payflow.outbox.writer import enqueue

WITHDRAWAL_SCOPE = "accounts.withdraw"
ACCEPTED = 202

# Finds the merchant's payout made under an Idempotency-Key, in the caller's transaction:
# (conn, merchant id, key) -> its row or None. The payouts are the chain's; the caller
# (the API) passes `payflow.chain.payouts.holds.payout_by_key`.
PayoutByKey = Callable[[asyncpg.Connection, UUID, str], Awaitable[object | None]]

# Places the on-chain payout in the caller's transaction: (account row, amount) ->
# (the payout's wire body, created). It raises its own refusals (funds, frozen, chain).
PlacePayout = Callable[[asyncpg.Connection, Any, Decimal], Awaitable[tuple[dict[str, Any], bool]]]


class DerivedEventTaken(Conflict):
    """A derived event id (`wd:`) exists although the key's lock saw none: stop the request."""


@dataclass(frozen=True, slots=True)
class WithdrawalRequest:
    """A withdrawal as the merchant asked for it, once its amount is parsed.

    `account` is the `accounts` row money leaves (the caller has checked that the
    merchant owns it); `amount` is positive, in the asset's units, at most `scale`
    decimals; `request_hash` digests the whole request (`idempotency.records.request_hash`
    under `WITHDRAWAL_SCOPE`); `amount_field` names the amount in errors.
    """

    merchant_id: UUID
    idempotency_key: str
    request_hash: str
    account: Any
    amount: Decimal
    scale: int
    trace_id: str
    amount_field: str = "body.amount"


def withdrawal_event_id(merchant_id: UUID, key: str) -> str:
    """Deterministic per merchant and Idempotency-Key, so a retry never makes a second event."""
    return "wd:" + idempotency_key("withdrawal", str(merchant_id), key)


async def replay_withdrawal(
    conn: asyncpg.Connection, merchant_id: UUID, key: str, request_hash: str
) -> StoredResponse | None:
    """Take the key's advisory lock for this transaction; the stored answer, if any.

    None means the lock is ours and nothing is stored: go on with `request_withdrawal`
    in the same transaction. Raises `IdempotencyInProgress` (409, the key is in flight
    elsewhere) or `IdempotencyKeyReused` (409, the key was used with another body).
    A stored answer is replayed whatever the account or the limits are now.
    """
    return await lookup(conn, merchant_id, WITHDRAWAL_SCOPE, key, request_hash)


async def request_withdrawal(
    conn: asyncpg.Connection,
    request: WithdrawalRequest,
    *,
    payout_by_key: PayoutByKey,
    place_payout: PlacePayout | None = None,
) -> StoredResponse:
    """Record the withdrawal and store the key's answer (202 and its wire body).

    Runs after `replay_withdrawal` found nothing, in its transaction. `place_payout`
    None makes a ledger-only withdrawal, otherwise an on-chain payout; `payout_by_key`
    finds a payout the key already made (so one key never names one of each). Raises
    `LimitExceeded` (422 naming `amount_field`) above the asset's `max_withdrawal`;
    `IdempotencyKeyReused` (409) when the key already made the other kind, or a
    ledger withdrawal with other details; `DerivedEventTaken` (409) when the derived
    event id is taken by a row this key did not write; and whatever `place_payout` raises.

    Invariant: the event (or payout), its outbox row and the key's record commit
    together or not at all; one key never moves money out twice, whatever its record's
    retention. An answer rebuilt from the event row (the record expired) is returned
    but not stored again.
    """
    asset: str = request.account["asset"]
    await check_limit(conn, asset, LimitKind.WITHDRAWAL, request.amount, field=request.amount_field)
    event_id = withdrawal_event_id(request.merchant_id, request.idempotency_key)
    await _refuse_the_other_kind(
        conn, request, event_id, on_chain=place_payout is not None, payout_by_key=payout_by_key
    )
    if place_payout is not None:
        answer, created = await place_payout(conn, request.account, request.amount)
    else:
        answer, created = await _record_withdrawal(conn, request, event_id)
    response = StoredResponse(ACCEPTED, answer)
    if created:
        await store(
            conn,
            request.merchant_id,
            WITHDRAWAL_SCOPE,
            request.idempotency_key,
            request.request_hash,
            response,
        )
    return response


def _withdrawal_body(event: Any, asset: str) -> dict[str, Any]:
    """The 202 answer, rebuilt from the payment event row (its current status)."""
    return {
        "event_id": event["event_id"],
        "account_id": str(event["account_id"]),
        "amount": wire_amount(event["amount"], asset),
        "status": event["status"],
    }


async def _record_withdrawal(
    conn: asyncpg.Connection, request: WithdrawalRequest, event_id: str
) -> tuple[dict[str, Any], bool]:
    """Record the withdrawal event and its `ledger.event` outbox row, or judge the one made.

    Runs under the Idempotency-Key's advisory lock after the key's record was found
    missing, so the event row is the last word: an event with the derived id that
    matches the request (account, amount at the asset's scale, type) is answered from
    its row with `created` False and nothing written; one that differs raises
    `IdempotencyKeyReused` (409). An insert that inserts nothing raises
    `DerivedEventTaken`: the transaction stops rather than announce or echo anything.
    Returns (the wire body, created).
    """
    account = request.account
    existing = await conn.fetchrow(SQL["get_event"], event_id)
    if existing is not None:
        same = (
            existing["account_id"] == account["id"]
            and existing["amount"] == request.amount
            and existing["event_type"] == EventType.WITHDRAWAL.value
        )
        if not same:
            raise IdempotencyKeyReused(
                "this Idempotency-Key was already used for a withdrawal with different details"
            )
        return _withdrawal_body(existing, account["asset"]), False
    inserted = await record_event(
        conn,
        event_id=event_id,
        account_id=account["id"],
        amount=format(request.amount, "f"),
        event_type=EventType.WITHDRAWAL,
        scale=request.scale,
        trace_id=request.trace_id,
    )
    if not inserted:
        log.error("payflow.withdrawal.derived_id_taken", event_id=event_id)
        raise DerivedEventTaken("the request conflicts with an existing event; nothing was written")
    await enqueue(conn, TOPIC_LEDGER_EVENT, {"version": 1, "event_id": event_id}, request.trace_id)
    body = {
        "event_id": event_id,
        "account_id": str(account["id"]),
        "amount": wire_amount(request.amount, account["asset"]),
        "status": "pending",
    }
    return body, True


async def _refuse_the_other_kind(
    conn: asyncpg.Connection,
    request: WithdrawalRequest,
    event_id: str,
    *,
    on_chain: bool,
    payout_by_key: PayoutByKey,
) -> None:
    """Under the key's advisory lock, after its record was found missing: one
    Idempotency-Key names one withdrawal, ledger-only (`wd:` event) or on-chain (a
    `payouts` row), never one of each. Raises `IdempotencyKeyReused` (409) when the key
    already made the other kind (once the key's record had expired, the same key could
    otherwise make a ledger withdrawal and then a payout, and money would leave twice)."""
    if on_chain:
        taken = await conn.fetchval(SQL["get_event"], event_id)
        kind = "a ledger withdrawal"
    else:
        taken = await payout_by_key(conn, request.merchant_id, request.idempotency_key)
        kind = "an on-chain payout"
    if taken is not None:
        raise IdempotencyKeyReused(f"this Idempotency-Key was already used for {kind}")
