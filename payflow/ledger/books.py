"""The chart of accounts: payflow's own accounts (migration 0029) with their balances.

A system account keeps no running balance (no row every posting would lock): its balance
is the sum of its legs in `ledger_legs`, shown on its normal side (a custody account, a
debit-normal asset of payflow, is positive when payflow holds money; `fees`, a
credit-normal revenue, is positive when fees were charged). What payflow owes its
customers and merchants is the sum of their accounts' balances, per asset.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from payflow.db import Connection
from payflow.ledger.states import SQL


class SystemAccountKind(StrEnum):
    """Mirrored by the CHECK `ledger_accounts_kind_valid`."""

    CUSTODY = "custody"  # what payflow's addresses and hot wallets hold (per chain)
    GATEWAY = "gateway"  # what the card gateway owes for succeeded charges
    FEES = "fees"  # fees payflow charged (credit-normal)
    NETWORK_FEES = "network_fees"  # gas payflow paid (per chain)
    REORG_LOSS = "reorg_loss"  # shortfalls of reversed deposits already spent
    OPENING = "opening"  # the counterpart of opening balances
    ADJUSTMENTS = "adjustments"  # operator corrections
    TREASURY = "treasury"  # the owners' treasury wallets, swept to (per chain; 0031)


class NormalSide(StrEnum):
    DEBIT = "debit"
    CREDIT = "credit"


@dataclass(frozen=True, slots=True)
class SystemAccount:
    code: str  # e.g. custody:ETH_MAINNET:USDC
    kind: SystemAccountKind
    chain: str | None
    asset: str
    normal_side: NormalSide
    balance: Decimal  # on its normal side
    legs: int


@dataclass(frozen=True, slots=True)
class CustomerTotal:
    asset: str
    balance: Decimal  # owed to customers and merchants (credit side)
    accounts: int


async def chart_of_accounts(conn: Connection) -> list[SystemAccount]:
    """Every system account, by asset then code, with its balance summed from the journal."""
    return [
        SystemAccount(
            code=r["code"],
            kind=SystemAccountKind(r["kind"]),
            chain=r["chain"],
            asset=r["asset"],
            normal_side=NormalSide(r["normal_side"]),
            balance=r["balance"],
            legs=r["legs"],
        )
        for r in await conn.fetch(SQL["chart_of_accounts"])
    ]


async def customer_totals(conn: Connection) -> list[CustomerTotal]:
    """Per asset, the sum of the customers' and merchants' balances."""
    return [
        CustomerTotal(r["asset"], r["balance"], r["accounts"])
        for r in await conn.fetch(SQL["customer_totals"])
    ]
