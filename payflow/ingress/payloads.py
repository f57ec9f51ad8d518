"""What every provider payload becomes: one `ProviderEvent` per activity (pure, no I/O).

The formats themselves (payflow's generic event, Alchemy "Address Activity") are in
`payflow.ingress.formats`, one module each, with the registry and `parse_payload` in
its `__init__`. Here are what they share: the event, the reasons an event is kept for
review, the field checks a format uses to keep an activity (`Kept`), and the per-delivery
rule that two activities never share an id (`separate_repeats`).

Parsing never raises on content: whatever cannot be credited becomes an event with a
`problem` (an `UnmatchedReason`) that is kept for review. Nothing here decides an asset
or decimals: the payload's claims (`asset`, `contract`, `decimals`) are checked against
payflow's token registry when the event lands (`payflow.ingress.service`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from payflow.errors import BadInput
from payflow.ingress.ids import review_id
from payflow.ingress.rawjson import canonical_bytes, fingerprint, safe_json, safe_text
from payflow.ledger.records import EventType

EVM_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}", re.ASCII)
OTHER_ADDRESS = re.compile(r"[1-9A-HJ-NP-Za-km-z]{8,128}", re.ASCII)
CHAIN = re.compile(r"[A-Z0-9_]{2,40}", re.ASCII)
TX_HASH = re.compile(r"[0-9A-Za-z]{8,128}", re.ASCII)
HEX_QUANTITY = re.compile(r"0x[0-9a-fA-F]{1,80}", re.ASCII)
TEXT_LIMIT = 200


class UnmatchedReason(StrEnum):
    """Why a provider event was kept for review instead of credited (SQL CHECK mirrors it)."""

    UNKNOWN_ADDRESS = "unknown_address"
    ASSET_MISMATCH = "asset_mismatch"
    UNKNOWN_TOKEN = "unknown_token"  # noqa: S105 - a reason name, not a credential
    UNKNOWN_CHAIN = "unknown_chain"
    NFT = "nft"
    ZERO_VALUE = "zero_value"
    INVALID = "invalid"
    AMBIGUOUS_ID = "ambiguous_id"
    REMOVED = "removed"
    OVER_LIMIT = "over_limit"
    UNSUPPORTED = "unsupported"


class InvalidPayload(BadInput):
    """The signed body is not JSON at all; `field` names the offending part (422)."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(f"{field_path}: {message}")
        self.field = field_path
        self.message = message


class Kept(Exception):
    """Raised by a format's field checks: stop parsing one activity and keep it for
    review with `reason` and `detail`. A format catches it; it never leaves a parser."""

    def __init__(self, reason: UnmatchedReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class ProviderEvent:
    """One activity of a delivery. Every text field is storable (NUL-free, valid UTF-8).

    `event_id` is the stored id in the source's namespace (`payflow.ingress.ids`).
    `asset`, `contract` and `decimals` are what the payload *claims*; `native` is true
    when it claims the chain's native asset. Exactly one of `units` (integer base units,
    Alchemy) and `amount` (decimal string, generic) is set for a creditable event.
    `distinct` is false when the id lacks the field that tells two activities apart.
    `problem` is set when the event is kept for review, with a `detail` for the operator.
    """

    event_id: str
    source: str
    chain: str
    position: int
    fingerprint: str
    payload: Any = field(repr=False)
    event_type: EventType = EventType.DEPOSIT
    to_address: str | None = None
    asset: str | None = None
    contract: str | None = None
    native: bool = False
    units: int | None = None
    amount: str | None = None
    decimals: int | None = None
    tx_hash: str | None = None
    distinct: bool = True
    problem: UnmatchedReason | None = None
    detail: str | None = None


def normalise_address(raw: object, field_path: str) -> str:
    """An address in its canonical form: EVM hex lower-cased, others (base58) unchanged.

    Raises `BadInput` naming `field_path` for anything else.
    """
    if not isinstance(raw, str):
        raise BadInput(f"{field_path} must be a string")
    if EVM_ADDRESS.fullmatch(raw):
        return raw.lower()
    if OTHER_ADDRESS.fullmatch(raw):
        return raw
    raise BadInput(f"{field_path} is not a valid address")


def claimed_text(raw: object) -> str | None:
    """A storable, bounded rendering of a claimed value, for review columns."""
    if raw is None:
        return None
    text = raw if isinstance(raw, str) else canonical_bytes(raw).decode("ascii")
    return safe_text(text, TEXT_LIMIT)


def checked_address(raw: object, field_path: str) -> str:
    """`normalise_address`, or `Kept` (`invalid`, naming `field_path`) for a bad address."""
    try:
        return normalise_address(raw, field_path)
    except BadInput as error:
        raise Kept(UnmatchedReason.INVALID, str(error)) from None


def hex_quantity(raw: object, field_path: str) -> int:
    """A non-negative integer given as a JSON integer or a `0x` hex string (at most 80
    digits), or `Kept` (`invalid`, naming `field_path`)."""
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    if isinstance(raw, str) and HEX_QUANTITY.fullmatch(raw):
        return int(raw, 16)
    raise Kept(UnmatchedReason.INVALID, f"{field_path} must be a 0x-prefixed hex quantity")


def checked_chain(raw: object) -> str:
    """A chain name as payflow spells it (`^[A-Z0-9_]{2,40}$`), or `Kept` (`invalid`)."""
    if isinstance(raw, str) and CHAIN.fullmatch(raw):
        return raw
    raise Kept(UnmatchedReason.INVALID, "chain must match ^[A-Z0-9_]{2,40}$")


def kept_whole(payload: Any, chain: str, source: str, detail: str) -> ProviderEvent:
    """A body that is JSON but no known shape: kept whole, under a content-derived id."""
    digest = fingerprint(payload)
    return ProviderEvent(
        event_id=review_id(source, digest, "0"),
        source=source,
        chain=chain,
        position=0,
        fingerprint=digest,
        payload=safe_json(payload),
        problem=UnmatchedReason.INVALID,
        detail=detail,
    )


def separate_repeats(events: list[ProviderEvent]) -> list[ProviderEvent]:
    """Never let one delivery merge two activities under one id.

    A later event whose id was already used in this delivery by an event of its kind
    (creditable, or already kept for review) is kept for review (`ambiguous_id`, under a
    review id) unless its id is `distinct` and its content equals the first's (the
    provider repeated itself: it lands as a duplicate). A creditable event and a kept one
    may share an id (a removed log and its replacement): they land in different tables,
    and `land_event` keeps unmatched rows apart by their payload.
    """
    first: dict[tuple[bool, str], ProviderEvent] = {}
    seen: dict[tuple[str, str], int] = {}
    result: list[ProviderEvent] = []
    for event in events:
        prior = first.setdefault((event.problem is None, event.event_id), event)
        if prior is event or (event.distinct and prior.fingerprint == event.fingerprint):
            result.append(event)
            continue
        occurrence = seen.get((event.event_id, event.fingerprint), 0)
        seen[(event.event_id, event.fingerprint)] = occurrence + 1
        result.append(
            ambiguous(event, f"id {event.event_id} is used by another activity", occurrence)
        )
    return result


def ambiguous(event: ProviderEvent, detail: str, occurrence: int = 0) -> ProviderEvent:
    """`event` kept for review as `ambiguous_id` under a review id derived from its
    derived id, its content and `occurrence` (stable across redeliveries)."""
    new_id = review_id(event.source, event.event_id, event.fingerprint, str(occurrence))
    return replace(event, event_id=new_id, problem=UnmatchedReason.AMBIGUOUS_ID, detail=detail)
