"""Request and response models: the source of /openapi.json.

Amounts are decimal strings on the wire; a JSON number is refused with a message
that says why. Timestamps are RFC 3339 in UTC.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from payflow.api.checks import (
    AMOUNT_EXAMPLE,
    AMOUNT_FIELD_PATTERN,
    amount_must_be_string,
    check_metadata,
    clean_text,
    free_text,
)
from payflow.chain.addresses import checked_evm_address
from payflow.ingress.payloads import EVM_ADDRESS


class Strict(BaseModel):
    """A request body: unknown fields refused. Its booleans are `JsonBool`."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# A request body's boolean: JSON `true` or `false` only. Pydantic's lax `bool` would read
# "yes", "off", 0 or 1 as a boolean (so `"enabled": "no"` would not say what it means);
# every bool field of a `Strict` model is this type (tests/unit/api/test_strict_bodies.py).
JsonBool = StrictBool


class Problem(BaseModel):
    """RFC 9457 problem details; validation errors list each offending field."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, str]] | None = None


class PaymentCreate(Strict):
    amount: str = Field(
        description="Decimal string, > 0, within the currency's scale",
        examples=[AMOUNT_EXAMPLE],
        min_length=1,
        max_length=64,
        pattern=AMOUNT_FIELD_PATTERN,
    )
    currency: str = Field(description="A configured fiat currency", examples=["RUB"])
    description: str | None = Field(default=None, max_length=512)
    metadata: dict[str, Any] = Field(default_factory=dict)
    webhook_url: str | None = Field(default=None, max_length=2048)

    _amount_string = field_validator("amount", mode="before")(amount_must_be_string)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_metadata(value)
        return value

    @field_validator("currency", "webhook_url")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return None if value is None else clean_text(value)

    @field_validator("description")
    @classmethod
    def _free_text(cls, value: str | None) -> str | None:
        return None if value is None else free_text(value)


class PaymentAccepted(BaseModel):
    payment_id: str
    status: Literal["pending", "succeeded", "failed"] = Field(
        description="pending when created; a replay answered from the payment row after "
        "its Idempotency-Key record expired shows the current status"
    )
    created_at: str = Field(description="RFC 3339 timestamp in UTC")


class PaymentView(BaseModel):
    payment_id: str
    amount: str
    currency: str
    description: str | None
    metadata: dict[str, Any]
    status: Literal["pending", "succeeded", "failed"]
    idempotency_key: str
    webhook_url: str | None
    webhook_delivered_at: str | None
    webhook_attempts: int
    created_at: str
    processed_at: str | None


class PaymentPage(BaseModel):
    items: list[PaymentView]
    next_cursor: str | None


class AccountCreate(Strict):
    asset: str = Field(pattern=r"^[A-Z0-9]{2,12}$", examples=["USDC"])


class AccountView(BaseModel):
    account_id: str
    asset: str
    balance: str
    held: str = Field(description="Sum of open payout holds (amount plus fee at its maximum)")
    available: str = Field(description="balance - held; what a new payout or withdrawal may use")
    pending_incoming: str = Field(
        description="Chain deposits seen but not yet final and credited; never spendable"
    )
    status: Literal["active", "frozen"]
    created_at: str
    updated_at: str


class LedgerEntry(BaseModel):
    entry_id: int
    amount: str = Field(description="Signed decimal string: negative for debits")
    event_type: str
    event_id: str
    balance_after: str
    created_at: str


class LedgerPage(BaseModel):
    items: list[LedgerEntry]
    next_cursor: str | None


class AccountBalanceAt(BaseModel):
    """An account's balance at an instant (`GET /api/v1/accounts/{id}?at=`), summed from
    its journal: every leg written at or before `at`."""

    account_id: str
    asset: str
    at: str = Field(description="The instant asked for, RFC 3339 in UTC")
    balance: str = Field(description="Decimal string at the asset's scale")


class StatementMovement(BaseModel):
    at: str = Field(description="When the leg was written, RFC 3339 in UTC")
    amount: str = Field(description="Signed decimal string: negative for debits")
    balance_after: str
    kind: str = Field(description="The payment event's type, or the transfer's kind (opening)")
    counterparty: str | None = Field(
        description="The account on the other side of the posting: a system account's code"
        " (custody:ETH_MAINNET:ETH, gateway:USD, opening:USD) or account:<id>",
        examples=["custody:ETH_MAINNET:ETH"],
    )
    counterparty_kind: str | None = Field(
        description="custody, gateway, fees, network_fees, reorg_loss, opening, adjustments,"
        " or account (a customer or merchant account)",
        examples=["custody"],
    )
    reference: str = Field(description="The payment event id, or the transfer's reference")


class StatementView(BaseModel):
    """The period is half-open: movements with from < at <= to. opening_balance is the
    balance at `from`, closing_balance the balance at `to`, and opening_balance plus the
    sum of the movements' amounts is closing_balance."""

    account_id: str
    asset: str
    from_: str = Field(alias="from", description="RFC 3339 in UTC, exclusive")
    to: str = Field(description="RFC 3339 in UTC, inclusive")
    opening_balance: str
    closing_balance: str
    movements: list[StatementMovement]


class DepositAddressCreate(Strict):
    """With `address`: import that address (admin key). Without: derive the next address
    from `ETH_DEPOSIT_XPUB` (the account's owner; Idempotency-Key required)."""

    chain: str = Field(pattern=r"^[A-Z0-9_]{2,40}$", examples=["ETH_MAINNET"])
    address: str | None = Field(
        default=None, min_length=8, max_length=128, examples=["0x" + "ab" * 20]
    )

    @field_validator("address")
    @classmethod
    def _checksummed(cls, value: str | None) -> str | None:
        # Every chain payflow registers is an EVM chain (`chains`, EVM_CHAINS): an address
        # of another form could never receive a transfer payflow verifies. An EVM address
        # is checked (EIP-55 when mixed case, not zero).
        if value is None:
            return value
        if not EVM_ADDRESS.fullmatch(value):
            raise ValueError("must be a 0x-prefixed 20-byte hex address (an EVM chain's)")
        checked_evm_address(value)
        return value


class DepositAddressView(BaseModel):
    chain: str
    address: str
    account_id: str
    checksum_address: str | None = None  # EIP-55 form of a derived address
    derivation_path: str | None = None  # m/44'/60'/0'/0/i of a derived address


class WithdrawalCreate(Strict):
    amount: str = Field(min_length=1, max_length=64, examples=["1.5"], pattern=AMOUNT_FIELD_PATTERN)
    # With `to_address` the request is an on-chain payout; without it, a provider-reported
    # ledger-only withdrawal.
    to_address: str | None = Field(
        default=None, pattern=r"^0x[0-9a-fA-F]{40}$", examples=["0x" + "ab" * 20]
    )
    chain: str | None = Field(default=None, pattern=r"^[A-Z0-9_]{2,40}$", examples=["ETH_MAINNET"])

    _amount_string = field_validator("amount", mode="before")(amount_must_be_string)

    @field_validator("to_address")
    @classmethod
    def _checksummed(cls, value: str | None) -> str | None:
        return None if value is None else checked_evm_address(value)


class MerchantEventView(BaseModel):
    """One event of the caller's stream: the Standard Webhooks body a webhook of it carries
    (`type`, `timestamp`, `data`), with its id (`evt_` + 32 hex digits, the `webhook-id`)."""

    id: str
    type: str
    timestamp: str = Field(description="RFC 3339 in UTC with Z, when the event was recorded")
    data: dict[str, Any] = Field(description="The type's fields (docs/api.md, Event types)")


class MerchantEventPage(BaseModel):
    data: list[MerchantEventView]
    has_more: bool
    next_cursor: str | None


class EventView(BaseModel):
    event_id: str
    account_id: str
    event_type: str
    amount: str
    asset: str
    status: Literal["pending", "enqueued", "processing", "confirmed", "failed"]
    outcome: (
        Literal["pending", "success", "insufficient_funds", "account_frozen", "amount_overflow"]
        | None
    )
    last_error: str | None
    trace_id: str | None
    created_at: str
    updated_at: str


class DepositReportView(BaseModel):
    """A provider's deposit report, read back by the id the provider webhook answered.

    A report is a hint: `pending` until the node shows the transfer final (`confirmed`,
    with `transfer_id` and, once credited, `credit_event_id`, the ledger event to read at
    GET /api/v1/events/{credit_event_id}) or refutes it (`refuted`, with `reason`)."""

    event_id: str
    event_type: Literal["deposit_report"]
    account_id: str
    amount: str
    asset: str
    status: Literal["pending", "confirmed", "refuted"]
    reason: str | None
    transfer_id: str | None
    deposit_status: str | None
    credit_event_id: str | None
    trace_id: str | None
    created_at: str
    decided_at: str | None


class PayoutView(BaseModel):
    payout_id: str
    account_id: str
    asset: str
    amount: str = Field(description="Decimal string at the asset's scale")
    fee_held: str = Field(description="The fee held at its maximum; the excess is released")
    fee_paid: str | None
    chain: str
    to_address: str
    status: Literal["held", "signed", "sent", "confirmed", "failed"]
    tx_hash: str | None
    created_at: str
    updated_at: str


class WithdrawalAccepted(BaseModel):
    event_id: str
    account_id: str
    amount: str = Field(description="Decimal string at the asset's scale", examples=["1.00"])
    status: Literal["pending", "enqueued", "processing", "confirmed", "failed"] = Field(
        description="pending when created; a replay answered from the event row after its "
        "Idempotency-Key record expired shows the event's current status"
    )


UnmatchedReasonName = Literal[
    "unknown_address",
    "asset_mismatch",
    "unknown_asset",
    "unsupported",
    "unknown_token",
    "unknown_chain",
    "nft",
    "zero_value",
    "invalid",
    "ambiguous_id",
    "removed",
    "over_limit",
]


class IngressEventResult(BaseModel):
    event_id: str
    result: Literal["recorded", "duplicate", "unmatched"]
    reason: UnmatchedReasonName | None = None


class IngressAccepted(BaseModel):
    status: Literal["accepted"]
    trace_id: str
    events: list[IngressEventResult]


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str]


PROBLEM_TITLES = {
    400: "Malformed request body",
    401: "Missing or invalid credentials",
    403: "Forbidden: an admin key, or a write key (a read key may only GET and HEAD)",
    404: "Not found",
    409: "Conflict (Idempotency-Key in progress or reused, or duplicate)",
    413: "Request body too large",
    415: "The body is not labelled as JSON in UTF-8",
    422: "Validation failed; `errors` names the fields",
    429: "Rate limited; see Retry-After",
    503: "A dependency is unavailable; see Retry-After",
}


def problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for problem+json answers with the given statuses."""
    schema = Problem.model_json_schema()
    return {
        code: {
            "description": PROBLEM_TITLES[code],
            "content": {"application/problem+json": {"schema": schema}},
        }
        for code in codes
    }


COMMON_PROBLEMS = (401, 413, 422, 429, 503)


class UnmatchedEvent(BaseModel):
    event_id: str
    reason: UnmatchedReasonName
    chain: str
    address: str | None
    asset: str | None
    amount: str | None
    tx_hash: str | None
    trace_id: str | None
    created_at: str
    detail: str | None = None
    position: int | None = None


class UnmatchedPage(BaseModel):
    items: list[UnmatchedEvent]
    next_cursor: str | None


class DeadLetterOut(BaseModel):
    id: int
    source: Literal["payment_event", "payment", "webhook", "endpoint_delivery"]
    subject_id: str
    payload: dict[str, Any]
    error: str
    attempt: int
    created_at: str
    resolved_at: str | None
    resolved_by: str | None
    resolution: str | None


class DeadLetterPage(BaseModel):
    items: list[DeadLetterOut]


class ReplayOut(BaseModel):
    id: int
    resolution: str
    resolved_by: str
