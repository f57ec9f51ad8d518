"""The gateway against its record: `payflow recon --gateway --date YYYY-MM-DD`.

The gateway lists the charges it settled on a UTC day (`SettlementRecord.settled`; the
emulator keeps them in Redis); the books hold one `gateway:<currency>` leg per merchant
payment credit (`payment:<payment id>`, debit: what the gateway owes). Per payment:
- `missing`: settled by the gateway, no gateway leg in the books at all;
- `extra`: a gateway leg posted that day that the gateway's record of the day lacks, and
  its record of the day before and after too;
- `different`: both, with another amount or currency.
A charge settled just before midnight whose credit was posted just after (or the other
way) is `other_day`: listed, not a finding. Any finding makes the report dirty (exit 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

import asyncpg

from payflow.money import format_amount
from payflow.payments.gateway import SettledCharge, SettlementRecord
from payflow.payments.records import SQL


@dataclass(slots=True)
class GatewayReconReport:
    day: date
    settled: int = 0
    booked: int = 0
    missing: list[str] = field(default_factory=list)  # "<payment id> <amount> <currency>"
    extra: list[str] = field(default_factory=list)
    different: list[str] = field(default_factory=list)
    other_day: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.missing or self.extra or self.different)

    def summary(self) -> str:
        return (
            f"recon gateway date={self.day.isoformat()} settled={self.settled} "
            f"booked={self.booked} missing={len(self.missing)} extra={len(self.extra)} "
            f"different={len(self.different)} other_day={len(self.other_day)} "
            f"result={'clean' if self.clean else 'DIRTY'}"
        )


def _day_bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time(0), tzinfo=UTC)
    return start, start + timedelta(days=1)


async def reconcile_gateway(
    pool: asyncpg.Pool, gateway: SettlementRecord, day: date
) -> GatewayReconReport:
    """Match the gateway's settled charges of `day` with the books' gateway legs."""
    report = GatewayReconReport(day)
    settled = {str(c.payment_id): c for c in await gateway.settled(day)}
    report.settled = len(settled)
    start, end = _day_bounds(day)
    async with pool.acquire() as conn:
        booked = {
            r["payment_id"]: r for r in await conn.fetch(SQL["gateway_legs_between"], start, end)
        }
        elsewhere = {
            r["payment_id"]: r
            for r in await conn.fetch(SQL["gateway_legs_of"], sorted(set(settled) - set(booked)))
        }
    report.booked = len(booked)
    for pid, charge in sorted(settled.items()):
        leg = booked.get(pid) or elsewhere.get(pid)
        if leg is None:
            report.missing.append(_describe(pid, charge.amount, charge.currency))
            continue
        if leg["amount"] != charge.amount or leg["currency"] != charge.currency:
            report.different.append(
                f"{pid} gateway {format_amount(charge.amount)} {charge.currency}"
                f" books {format_amount(leg['amount'])} {leg['currency']}"
            )
        elif pid not in booked:
            report.other_day.append(
                f"{_describe(pid, charge.amount, charge.currency)}"
                f" booked {leg['posted_at']:%Y-%m-%d}"
            )
    unknown = sorted(set(booked) - set(settled))
    if unknown:
        around: dict[str, SettledCharge] = {}
        for other in (day - timedelta(days=1), day + timedelta(days=1)):
            around.update({str(c.payment_id): c for c in await gateway.settled(other)})
        for pid in unknown:
            leg = booked[pid]
            found = around.get(pid)
            if found is None:
                report.extra.append(_describe(pid, leg["amount"], leg["currency"]))
            elif found.amount != leg["amount"] or found.currency != leg["currency"]:
                report.different.append(
                    f"{pid} gateway {format_amount(found.amount)} {found.currency}"
                    f" books {format_amount(leg['amount'])} {leg['currency']}"
                )
            else:
                report.other_day.append(
                    f"{_describe(pid, leg['amount'], leg['currency'])} settled on another day"
                )
    return report


def _describe(pid: str, amount: Decimal, currency: str) -> str:
    return f"{pid} {format_amount(amount)} {currency}"
