"""Enumerations and records of the ledger domain, mirrored by CHECK constraints in SQL."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from uuid import UUID


class EventType(StrEnum):
    DEPOSIT = "deposit"
    AIRDROP = "airdrop"
    WITHDRAWAL = "withdrawal"
    WITHDRAWAL_FEE = "withdrawal_fee"
    PAYMENT_CREDIT = "payment_credit"
    # The compensating debit of a credited chain deposit a deep reorg undid.
    DEPOSIT_REVERSAL = "deposit_reversal"

    @property
    def is_credit(self) -> bool:
        return self in CREDIT_TYPES

    @property
    def requires_active(self) -> bool:
        """A debit a frozen account refuses. A deposit reversal takes back money that
        never arrived, so it applies to a frozen account too (balance still >= 0)."""
        return not self.is_credit and self is not EventType.DEPOSIT_REVERSAL


CREDIT_TYPES = frozenset({EventType.DEPOSIT, EventType.AIRDROP, EventType.PAYMENT_CREDIT})


class Outcome(StrEnum):
    """What posting an event did; recorded once per idempotency key."""

    PENDING = "pending"
    SUCCESS = "success"
    INSUFFICIENT_FUNDS = "insufficient_funds"
    ACCOUNT_FROZEN = "account_frozen"
    # The new balance would not fit its column (SQLSTATE 22003): terminal, alerted.
    AMOUNT_OVERFLOW = "amount_overflow"


class AccountStatus(StrEnum):
    ACTIVE = "active"
    FROZEN = "frozen"


@dataclass(frozen=True, slots=True)
class Account:
    id: UUID
    asset: str
    balance: Decimal
    initial_balance: Decimal
    status: AccountStatus


@dataclass(frozen=True, slots=True)
class PostingResult:
    """The outcome of `post_event`; `replayed` is True when an earlier delivery did the work."""

    event_id: str
    outcome: Outcome
    replayed: bool
    balance_after: Decimal | None = None
    detail: str | None = None  # why, for a fresh amount_overflow (also the event's last_error)
