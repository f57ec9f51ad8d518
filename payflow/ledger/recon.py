"""Reconciliation: balance = initial_balance + sum(ledger), and no duplicate effects.

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
from payflow.money import add

RECON_TIMEOUT_MS = 15 * 60 * 1000  # a full check reads every ledger row


@dataclass(frozen=True, slots=True)
class Mismatch:
    account_id: str
    balance: Decimal
    expected: Decimal


@dataclass(slots=True)
class ReconReport:
    scope: str
    accounts_checked: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    duplicate_ledger_events: list[str] = field(default_factory=list)
    confirmed_without_ledger: list[str] = field(default_factory=list)
    ledger_without_confirmation: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (
            self.mismatches
            or self.duplicate_ledger_events
            or self.confirmed_without_ledger
            or self.ledger_without_confirmation
        )


def _mismatches(rows: list[asyncpg.Record]) -> list[Mismatch]:
    return [
        Mismatch(str(r["id"]), r["balance"], add(r["initial_balance"], r["ledger_total"]))
        for r in rows
    ]


async def reconcile(
    pool: asyncpg.Pool,
    settings: DatabaseSettings,
    *,
    full: bool,
    recent_minutes: int | None = None,
) -> ReconReport:
    """Check balances against the ledger in one snapshot; `full` adds every account
    and the duplicate / orphan checks, otherwise only accounts touched in the last
    `recent_minutes` (`RECON_RECENT_MINUTES`, required then: `ValueError` without)."""
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
        return report
