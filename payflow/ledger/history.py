"""History from the journal: an account's balance at any instant, its statement for a
period, the trial balance per asset, and the other side of each payment event's posting.

Everything here is read from the legs (`balance_events` and `ledger_legs`, migration
0029), never from the running `accounts.balance`: a balance at an instant is the sum of
the account's legs written at or before it. A leg's `created_at` is its transaction's
start, so both legs of a posting share one instant, and a statement's period is half-open
`(from, to]`: its opening balance is the balance at `from`, its closing balance the
balance at `to`, and every movement in between is a leg with `from < created_at <= to`.
The reads that make up one answer share one REPEATABLE READ snapshot, so opening + Σ
movements = closing holds even while postings commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from uuid import UUID

from payflow.config import DatabaseSettings
from payflow.db import Connection
from payflow.db.tx import transaction
from payflow.errors import BadInput
from payflow.ledger.books import CustomerTotal, SystemAccount, chart_of_accounts, customer_totals
from payflow.ledger.recon import TrialBalanceLine
from payflow.ledger.states import SQL
from payflow.money import add, negate

STATEMENT_MAX_MOVEMENTS = 10_000  # a longer period is refused: ask for a shorter one


class StatementTooLong(BadInput):
    """The period holds more movements than one statement carries."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the period holds more than {limit} movements; ask for a shorter period"
            " (split it at any instant: each part's closing balance is the next one's opening)"
        )
        self.limit = limit


@dataclass(frozen=True, slots=True)
class Movement:
    at: datetime
    amount: Decimal  # signed, credit-positive (a credit to the account is +)
    balance_after: Decimal
    kind: str  # the payment event's type or the transfer's kind
    counterparty: str | None  # the other side's account code, e.g. custody:ETH_MAINNET:ETH
    counterparty_kind: str | None  # custody, gateway, fees, opening, ... or account
    reference: str  # the payment event id or the transfer's reference


@dataclass(frozen=True, slots=True)
class Statement:
    account_id: UUID
    start: datetime
    end: datetime
    opening: Decimal
    closing: Decimal
    movements: list[Movement]


async def balance_at(conn: Connection, account_id: UUID, at: datetime) -> Decimal:
    """The account's balance at `at`: the sum of its legs written at or before it."""
    value: Decimal = await conn.fetchval(SQL["balance_at"], account_id, at)
    return value


async def statement(
    conn: Connection,
    settings: DatabaseSettings,
    account_id: UUID,
    start: datetime,
    end: datetime,
    *,
    max_movements: int = STATEMENT_MAX_MOVEMENTS,
) -> Statement:
    """The account's statement for `(start, end]` in one snapshot; `StatementTooLong` when
    the period holds more than `max_movements` legs. `start` must be before `end`."""
    if start >= end:
        raise BadInput("the period's start must be before its end")
    async with transaction(conn, settings, isolation="repeatable read", readonly=True):
        opening = await balance_at(conn, account_id, start)
        closing = await balance_at(conn, account_id, end)
        rows = await conn.fetch(
            SQL["statement_movements"], account_id, start, end, max_movements + 1
        )
    if len(rows) > max_movements:
        raise StatementTooLong(max_movements)
    movements = []
    running = opening
    for r in rows:
        running = add(running, r["amount"])
        movements.append(
            Movement(
                at=r["created_at"],
                amount=r["amount"],
                balance_after=running,
                kind=r["kind"],
                counterparty=r["counterparty"],
                counterparty_kind=r["counterparty_kind"],
                reference=r["reference"],
            )
        )
    return Statement(account_id, start, end, opening, closing, movements)


@dataclass(frozen=True, slots=True)
class AssetBooks:
    """One asset's trial balance: debits and credits over the whole journal, the system
    accounts with their balances on their normal side, and what customers are owed."""

    asset: str | None  # None gathers legs naming an unknown account
    scale: int | None
    line: TrialBalanceLine
    system_accounts: list[SystemAccount]
    owed_to_customers: CustomerTotal | None

    @property
    def difference(self) -> Decimal:
        return add(self.line.debits, negate(self.line.credits))


async def trial_balance(conn: Connection, settings: DatabaseSettings) -> list[AssetBooks]:
    """Per asset (in code order), the trial balance and the chart behind it, in one
    snapshot. Assets with no leg yet show zero debits and credits."""
    async with transaction(conn, settings, isolation="repeatable read", readonly=True):
        lines = {r["asset"]: r for r in await conn.fetch(SQL["recon_trial_balance"])}
        scales = {r["code"]: r["scale"] for r in await conn.fetch(SQL["asset_scales"])}
        chart = await chart_of_accounts(conn)
        owed = {t.asset: t for t in await customer_totals(conn)}
    assets: list[str | None] = [None] if None in lines else []
    assets += sorted({*scales, *(a for a in lines if a is not None)})
    books = []
    for asset in assets:
        row = lines.get(asset)
        books.append(
            AssetBooks(
                asset=asset,
                scale=scales.get(asset) if asset is not None else None,
                line=TrialBalanceLine(
                    asset,
                    row["debits"] if row else Decimal(0),
                    row["credits"] if row else Decimal(0),
                ),
                system_accounts=[a for a in chart if a.asset == asset],
                owed_to_customers=owed.get(asset) if asset is not None else None,
            )
        )
    return books


@dataclass(frozen=True, slots=True)
class CounterpartyLeg:
    event_id: str
    account: str  # a system account's code, or account:<id>
    kind: str
    amount: Decimal  # signed, credit-positive
    at: datetime


async def counterparty_legs(
    conn: Connection, event_ids: list[str]
) -> dict[str, list[CounterpartyLeg]]:
    """For each payment event, the legs of its posting other than the customer's own."""
    found: dict[str, list[CounterpartyLeg]] = {}
    for r in await conn.fetch(SQL["counterparty_legs"], event_ids):
        found.setdefault(r["source_event_id"], []).append(
            CounterpartyLeg(
                r["source_event_id"], r["code"], r["kind"], r["amount"], r["created_at"]
            )
        )
    return found


@dataclass(frozen=True, slots=True)
class TransferLeg:
    """A customer account's leg of a transfer (an opening balance, an operator adjustment),
    with the account on the other side."""

    at: datetime
    kind: str  # the transfer's kind: opening, adjustment, ...
    reference: str  # the transfer's reference
    amount: Decimal  # signed, credit-positive
    counterparty: str | None  # the other side's account code, e.g. opening:ETH
    counterparty_kind: str | None  # opening, adjustments, ... or account


async def transfer_legs(conn: Connection, account_id: UUID, limit: int = 50) -> list[TransferLeg]:
    """The account's transfer legs, newest first, at most `limit` (its payment events' legs
    are in `balance_events`; these are the rest of its journal)."""
    return [
        TransferLeg(
            r["created_at"],
            r["kind"],
            r["reference"],
            r["amount"],
            r["counterparty"],
            r["counterparty_kind"],
        )
        for r in await conn.fetch(SQL["account_transfer_legs"], account_id, limit)
    ]
