"""Reconciliation: every account's balance equals its journal, the books balance, and no
duplicate effects.

The journal is double-entry (migration 0029): each posting's legs sum to zero per asset, so
over the whole journal debits equal credits per asset (the trial balance), and a customer
account's balance is the sum of its legs (its payment events' rows and its opening
transfer; `initial_balance` is no source of money). The full check proves both.

Both checks are read-only and run in one REPEATABLE READ snapshot, so concurrent
postings cannot make a consistent ledger look dirty. The snapshot is opened by
`transaction()` with `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`, never with
`SET SESSION CHARACTERISTICS`: behind PgBouncer in transaction pooling the whole check
then runs on one server connection and leaves no session state behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import asyncpg

from payflow.config import DatabaseSettings
from payflow.db.tx import transaction
from payflow.ledger.states import SQL

RECON_TIMEOUT_MS = 15 * 60 * 1000  # a full check reads every ledger row


@dataclass(frozen=True, slots=True)
class Mismatch:
    account_id: str
    balance: Decimal
    expected: Decimal


@dataclass(frozen=True, slots=True)
class TrialBalanceLine:
    """One asset's totals over the whole journal; `asset` None gathers legs naming an
    unknown account."""

    asset: str | None
    debits: Decimal
    credits: Decimal

    @property
    def balanced(self) -> bool:
        return self.asset is not None and self.debits == self.credits


@dataclass(frozen=True, slots=True)
class UnbalancedPosting:
    posting: str  # a payment event id, or `transfer:<id>`
    asset: str | None
    total: Decimal


UNBALANCED_SHOWN = 100


@dataclass(slots=True)
class ReconReport:
    scope: str
    accounts_checked: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    duplicate_ledger_events: list[str] = field(default_factory=list)
    confirmed_without_ledger: list[str] = field(default_factory=list)
    ledger_without_confirmation: list[str] = field(default_factory=list)
    trial_balance: list[TrialBalanceLine] = field(default_factory=list)
    unbalanced_postings: list[UnbalancedPosting] = field(default_factory=list)

    @property
    def unbalanced_assets(self) -> list[TrialBalanceLine]:
        return [line for line in self.trial_balance if not line.balanced]

    @property
    def clean(self) -> bool:
        return not (
            self.mismatches
            or self.duplicate_ledger_events
            or self.confirmed_without_ledger
            or self.ledger_without_confirmation
            or self.unbalanced_assets
            or self.unbalanced_postings
        )


def _mismatches(rows: list[asyncpg.Record]) -> list[Mismatch]:
    return [Mismatch(str(r["id"]), r["balance"], r["ledger_total"]) for r in rows]


async def reconcile(
    pool: asyncpg.Pool,
    settings: DatabaseSettings,
    *,
    full: bool,
    recent_minutes: int | None = None,
) -> ReconReport:
    """Check balances against the journal in one snapshot; `full` adds every account,
    the trial balance per asset (with any unbalanced posting) and the duplicate / orphan
    checks, otherwise only accounts touched in the last `recent_minutes`
    (`RECON_RECENT_MINUTES`, required then: `ValueError` without)."""
    if not full and recent_minutes is None:
        raise ValueError("a recent reconciliation needs recent_minutes")
    async with (
        pool.acquire() as conn,
        transaction(
            conn,
            settings,
            isolation="repeatable read",
            readonly=True,
            statement_timeout_ms=RECON_TIMEOUT_MS,
        ),
    ):
        if not full:
            minutes = recent_minutes
            report = ReconReport(scope=f"recent {minutes} min")
            report.accounts_checked = await conn.fetchval(SQL["recon_recent_count"], minutes)
            report.mismatches = _mismatches(await conn.fetch(SQL["recon_recent"], minutes))
            return report
        report = ReconReport(scope="full")
        report.accounts_checked = await conn.fetchval(SQL["account_count"])
        report.mismatches = _mismatches(await conn.fetch(SQL["recon_full"]))
        report.duplicate_ledger_events = [
            r["source_event_id"] for r in await conn.fetch(SQL["recon_duplicate_ledger"])
        ]
        report.confirmed_without_ledger = [
            r["event_id"] for r in await conn.fetch(SQL["recon_confirmed_without_ledger"])
        ]
        report.ledger_without_confirmation = [
            r["source_event_id"] for r in await conn.fetch(SQL["recon_ledger_without_success"])
        ]
        report.trial_balance = [
            TrialBalanceLine(r["asset"], r["debits"], r["credits"])
            for r in await conn.fetch(SQL["recon_trial_balance"])
        ]
        report.unbalanced_postings = [
            UnbalancedPosting(r["posting"], r["asset"], r["total"])
            for r in await conn.fetch(SQL["recon_unbalanced_postings"], UNBALANCED_SHOWN)
        ]
        return report
