"""Request and response models: the source of /openapi.json.

Amounts are decimal strings on the wire; a JSON number is refused with a message
that says why. Timestamps are RFC 3339 in UTC.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from payflow.chain.addresses import checked_evm_address
from payflow.wirejson import stdlib_loads

AMOUNT_FIELD_PATTERN = r"^[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$"  # as money.AMOUNT_PATTERN
AMOUNT_EXAMPLE = "10.00"


def _amount_must_be_string(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError('amount must be a decimal string such as "10.00", not a JSON boolean')
    if isinstance(value, int | float):
        raise ValueError('amount must be a decimal string such as "10.00", not a JSON number')
    return value


def clean_text(value: str) -> str:
    """Refuse text PostgreSQL cannot store (NUL) or UTF-8 cannot encode (lone surrogates)."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text") from None
    return value


INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1  # the integers orjson (and so payflow) stores
NUMBER_ADVICE = "; send such a value as a string"
# Floats at or above this magnitude are JSON-encoded with an exponent and stored by jsonb
# as integer literals (every float above 2^53 is integral).
FLOAT_AS_INT_FROM = 1e16
MAX_METADATA_DEPTH = 64  # objects and arrays inside `metadata`, well within orjson's 254


def check_metadata(value: Any) -> bool:
    """Refuse what metadata could not store unchanged; True when it holds a float.

    Walks nested objects and arrays without recursion. Raises `ValueError` for a
    non-finite number (`1e999`, `-1e999`, `NaN`, `Infinity`: JSON has no such values and
    they would be stored as null), an integer outside 64 bits (orjson cannot encode
    it), a float negative zero (`-0.0`: `jsonb` stores it as `0.0`), a float from 1e16
    within the 64-bit integer range (stored and read back as an integer), text with NUL
    (PostgreSQL `jsonb` cannot hold it) and nesting deeper than `MAX_METADATA_DEPTH`.
    Whether a finite float is the number the client wrote is
    decided by `floats_round_trip` on the raw body.
    """
    has_float = False
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise ValueError("text in metadata must not contain NUL characters")
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError("numbers in metadata must be finite" + NUMBER_ADVICE)
            if item == 0 and math.copysign(1.0, item) < 0:
                # jsonb has no negative zero: -0.0 would be stored as 0.0, and a retry of
                # the same request after the key's retention would then read as different.
                raise ValueError("numbers in metadata must not be -0.0" + NUMBER_ADVICE)
            if abs(item) >= FLOAT_AS_INT_FROM and INT64_MIN <= item <= UINT64_MAX:
                # Written with an exponent ("1e+16"), stored by jsonb as the integer
                # 10000000000000000 and read back as one: the float would come back an int.
                raise ValueError(
                    "a float from 1e16 up to 64-bit integers in metadata would be stored as"
                    " an integer; send an integer or a string"
                )
            has_float = True
        elif isinstance(item, int):
            if not INT64_MIN <= item <= UINT64_MAX:
                raise ValueError("integers in metadata must fit in 64 bits" + NUMBER_ADVICE)
        elif isinstance(item, dict | list):
            if depth >= MAX_METADATA_DEPTH:
                raise ValueError(f"metadata must nest at most {MAX_METADATA_DEPTH} levels deep")
            if isinstance(item, dict):
                pending.extend((key, depth) for key in item)
                pending.extend((child, depth + 1) for child in item.values())
            else:
                pending.extend((child, depth + 1) for child in item)
        else:
            raise ValueError(f"metadata cannot hold a {type(item).__name__}")
    return has_float


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


def floats_round_trip(raw_body: bytes) -> bool:
    """True when every decimal literal under the body's `metadata` survives as a float.

    A literal such as `0.10000000000000000001` or `1e-400` parses to a float that is a
    different number (`0.1`, `0.0`), which payflow would store silently changed; the
    raw text, read with exact decimals, is compared with the float it became.
    """
    try:
        document = stdlib_loads(raw_body, parse_float=Decimal, parse_constant=_refuse_constant)
    except ValueError:
        return False
    pending = [document.get("metadata") if isinstance(document, dict) else None]
    while pending:
        value = pending.pop()
        if isinstance(value, Decimal):
            as_float = float(value)
            if not math.isfinite(as_float) or Decimal(repr(as_float)) != value:
                return False
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return True


def utc_bound(value: datetime | None) -> datetime | None:
    """A timestamp filter converted to UTC; out-of-range instants are invalid, not a 500."""
    if value is None:
        return None
    try:
        converted = value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError("timestamp is out of range") from None
    if not 1970 <= converted.year <= 9998:
        raise ValueError("timestamp must fall between years 1970 and 9998")
    return converted


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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

    _amount_string = field_validator("amount", mode="before")(_amount_must_be_string)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_metadata(value)
        return value

    @field_validator("description", "currency", "webhook_url")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return None if value is None else clean_text(value)


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
        # An EVM-shaped address is checked (EIP-55, not zero); other chains' forms pass.
        if value is None or not value.startswith("0x") or len(value) != 42:
            return value
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
    # With `to_address` the request is an on-chain payout (issue 11); without it, the
    # provider-reported ledger-only withdrawal of before.
    to_address: str | None = Field(
        default=None, pattern=r"^0x[0-9a-fA-F]{40}$", examples=["0x" + "ab" * 20]
    )
    chain: str | None = Field(default=None, pattern=r"^[A-Z0-9_]{2,40}$", examples=["ETH_MAINNET"])

    _amount_string = field_validator("amount", mode="before")(_amount_must_be_string)

    @field_validator("to_address")
    @classmethod
    def _checksummed(cls, value: str | None) -> str | None:
        return None if value is None else checked_evm_address(value)


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
    403: "Admin key required",
    404: "Not found",
    409: "Conflict (Idempotency-Key in progress or reused, or duplicate)",
    413: "Request body too large",
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
    source: Literal["payment_event", "payment", "webhook"]
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
