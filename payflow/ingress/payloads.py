"""Provider payload formats, turned into one `ProviderEvent` per activity (pure, no I/O).

Two formats are accepted, both already authenticated by their HMAC signature:

- payflow's generic event: `{event_id, event_type, to_address, asset, amount, tx_hash}`
  with optional `chain` and `contract_address` (required for a token, absent for the
  chain's native asset); `amount` is a decimal string.
- Alchemy "Address Activity": `{type: "ADDRESS_ACTIVITY", event: {network, activity: [...]}}`;
  each activity is one event; its amount is `rawContract.rawValue` (hex base units).

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
from payflow.ingress.ids import ALCHEMY, GENERIC, namespaced, review_id
from payflow.ingress.rawjson import canonical_bytes, fingerprint, safe_json, safe_text
from payflow.ledger.records import EventType

EVM_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}", re.ASCII)
OTHER_ADDRESS = re.compile(r"[1-9A-HJ-NP-Za-km-z]{8,128}", re.ASCII)
CHAIN = re.compile(r"[A-Z0-9_]{2,40}", re.ASCII)
ASSET = re.compile(r"[A-Z0-9]{2,12}", re.ASCII)
TX_HASH = re.compile(r"[0-9A-Za-z]{8,128}", re.ASCII)
HEX_QUANTITY = re.compile(r"0x[0-9a-fA-F]{1,80}", re.ASCII)
PROVIDER_EVENT_TYPES = frozenset({EventType.DEPOSIT, EventType.AIRDROP})
NATIVE_CATEGORIES = frozenset({"external", "internal"})
TOKEN_CATEGORIES = frozenset({"token", "erc20"})
NFT_CATEGORIES = frozenset({"erc721", "erc1155", "specialnft"})
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


class _Kept(Exception):
    """Internal: stop parsing one activity and keep it for review with `reason`."""

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


def _text(raw: object) -> str | None:
    """A storable, bounded rendering of a claimed value, for review columns."""
    if raw is None:
        return None
    text = raw if isinstance(raw, str) else canonical_bytes(raw).decode("ascii")
    return safe_text(text, TEXT_LIMIT)


def _address(raw: object, field_path: str) -> str:
    try:
        return normalise_address(raw, field_path)
    except BadInput as error:
        raise _Kept(UnmatchedReason.INVALID, str(error)) from None


def _hex_int(raw: object, field_path: str) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    if isinstance(raw, str) and HEX_QUANTITY.fullmatch(raw):
        return int(raw, 16)
    raise _Kept(UnmatchedReason.INVALID, f"{field_path} must be a 0x-prefixed hex quantity")


def _chain(raw: object) -> str:
    if isinstance(raw, str) and CHAIN.fullmatch(raw):
        return raw
    raise _Kept(UnmatchedReason.INVALID, "chain must match ^[A-Z0-9_]{2,40}$")


def _kept_whole(payload: Any, chain: str, source: str, detail: str) -> ProviderEvent:
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


def parse_generic(payload: dict[str, Any], default_chain: str) -> ProviderEvent:
    """payflow's generic event; a field that is missing or malformed keeps it for review."""
    digest = fingerprint(payload)
    raw_id = payload.get("event_id")
    provider_id = raw_id if isinstance(raw_id, str) and raw_id else None
    event_id = namespaced(GENERIC, provider_id) if provider_id else review_id(GENERIC, digest, "0")
    chain_raw = payload.get("chain", default_chain)
    known: dict[str, Any] = {
        "event_id": event_id,
        "source": GENERIC,
        "chain": _text(chain_raw) or default_chain,
        "position": 0,
        "fingerprint": digest,
        "payload": safe_json(payload),
        "to_address": _text(payload.get("to_address")),
        "asset": _text(payload.get("asset")),
        "contract": _text(payload.get("contract_address")),
        "amount": _text(payload.get("amount")),
        "tx_hash": _text(payload.get("tx_hash")),
    }
    try:
        if provider_id is None:
            raise _Kept(UnmatchedReason.INVALID, "event_id is required and must be a string")
        chain = _chain(chain_raw)
        raw_type = payload.get("event_type")
        if not isinstance(raw_type, str) or raw_type not in PROVIDER_EVENT_TYPES:
            raise _Kept(UnmatchedReason.INVALID, "event_type must be one of: airdrop, deposit")
        to_address = _address(payload.get("to_address"), "to_address")
        asset = payload.get("asset")
        if not isinstance(asset, str) or ASSET.fullmatch(asset) is None:
            raise _Kept(UnmatchedReason.INVALID, "asset must match ^[A-Z0-9]{2,12}$")
        amount = payload.get("amount")
        if not isinstance(amount, str):
            raise _Kept(UnmatchedReason.INVALID, "amount must be a decimal string")
        tx_hash = payload.get("tx_hash")
        if not isinstance(tx_hash, str) or TX_HASH.fullmatch(tx_hash) is None:
            raise _Kept(UnmatchedReason.INVALID, "tx_hash must match ^[0-9A-Za-z]{8,128}$")
        contract_raw = payload.get("contract_address")
        contract = None
        if contract_raw is not None:
            if not isinstance(contract_raw, str) or EVM_ADDRESS.fullmatch(contract_raw) is None:
                raise _Kept(UnmatchedReason.UNKNOWN_TOKEN, "contract_address is not an address")
            contract = contract_raw.lower()
    except _Kept as kept:
        return ProviderEvent(**known, problem=kept.reason, detail=kept.detail)
    known.update(chain=chain, to_address=to_address, contract=contract, tx_hash=tx_hash.lower())
    return ProviderEvent(**known, event_type=EventType(raw_type), native=contract is None)


def _lower(raw: object) -> object:
    return raw.lower() if isinstance(raw, str) else raw


def _alchemy_id(
    tx_hash: str, category: str, log: object, activity: dict[str, Any]
) -> tuple[str, bool]:
    """The stored id of one activity, and whether it carries the field that tells two
    activities of one transaction apart (log index for tokens, trace address for
    internal transfers; a transaction has one external transfer)."""
    if isinstance(log, dict) and log.get("logIndex") is not None:
        index = _hex_int(log["logIndex"], "log.logIndex")
        return namespaced(ALCHEMY, f"{tx_hash}:{index}"), True
    trace = activity.get("typeTraceAddress")
    if category == "internal" and isinstance(trace, str) and trace:
        return namespaced(ALCHEMY, f"{tx_hash}:{trace.lower()}"), True
    if category == "external":
        return namespaced(ALCHEMY, f"{tx_hash}:external"), True
    # No distinguishing field: the id includes what was moved, in canonical form (so a
    # redelivery formatted differently keeps its id), and two different transfers never
    # share it; identical ones do, and the second is kept for review.
    contract = activity.get("rawContract")
    contract = contract if isinstance(contract, dict) else {}
    try:
        units: object = _hex_int(contract.get("rawValue"), "rawValue")
    except _Kept:
        units = contract.get("rawValue")
    moved = {
        "from": _lower(activity.get("fromAddress")),
        "to": _lower(activity.get("toAddress")),
        "contract": _lower(contract.get("address")),
        "units": units,
    }
    moved_digest = fingerprint(moved)[:32]
    return namespaced(ALCHEMY, f"{tx_hash}:{_text(category)}:{moved_digest}"), False


def _claimed_units(contract: object, known: dict[str, Any]) -> None:
    """Best effort, for review columns only: the units and decimals a kept activity
    claims (a removed log still shows how much it was about). Never raises."""
    if not isinstance(contract, dict):
        return
    for key, name in (("units", "rawValue"), ("decimals", "decimals")):
        try:
            known[key] = _hex_int(contract.get(name), name)
        except _Kept:
            known[key] = None


def _alchemy_activity(activity: object, position: int, chain: str) -> ProviderEvent:
    where = f"event.activity[{position}]"
    digest = fingerprint(activity)
    known: dict[str, Any] = {
        "event_id": review_id(ALCHEMY, digest, str(position)),
        "source": ALCHEMY,
        "chain": chain,
        "position": position,
        "fingerprint": digest,
        "payload": safe_json(activity),
    }
    try:
        if not isinstance(activity, dict):
            raise _Kept(UnmatchedReason.INVALID, f"{where} must be an object")
        known.update(
            to_address=_text(activity.get("toAddress")),
            asset=_text(activity.get("asset")),
            tx_hash=_text(activity.get("hash")),
        )
        _chain(chain)
        tx_hash = activity.get("hash")
        if not isinstance(tx_hash, str) or TX_HASH.fullmatch(tx_hash) is None:
            raise _Kept(UnmatchedReason.INVALID, f"{where}.hash must be a hex string")
        category_raw = activity.get("category")
        category = category_raw if isinstance(category_raw, str) else ""
        log = activity.get("log")
        known["event_id"], known["distinct"] = _alchemy_id(tx_hash.lower(), category, log, activity)
        known["tx_hash"] = tx_hash.lower()
        known["to_address"] = _address(activity.get("toAddress"), f"{where}.toAddress")
        asset = activity.get("asset")
        known["asset"] = _text(asset.upper() if isinstance(asset, str) else asset)
        _claimed_units(activity.get("rawContract"), known)
        if isinstance(log, dict) and log.get("removed") is True:
            raise _Kept(UnmatchedReason.REMOVED, "the log was removed by a reorganisation")
        nft = activity.get("erc721TokenId") is not None or activity.get("erc1155Metadata")
        if nft or category in NFT_CATEGORIES:
            raise _Kept(UnmatchedReason.NFT, "NFT transfers are not credited")
        if category not in NATIVE_CATEGORIES | TOKEN_CATEGORIES:
            raise _Kept(
                UnmatchedReason.UNSUPPORTED, f"category {_text(category_raw)} is not credited"
            )
        contract = activity.get("rawContract")
        if not isinstance(contract, dict):
            raise _Kept(UnmatchedReason.INVALID, f"{where}.rawContract must be an object")
        units = _hex_int(contract.get("rawValue"), f"{where}.rawContract.rawValue")
        known["units"] = units
        claimed_decimals = contract.get("decimals")
        if claimed_decimals is not None:
            try:
                known["decimals"] = _hex_int(claimed_decimals, "decimals")
            except _Kept:
                raise _Kept(
                    UnmatchedReason.UNKNOWN_TOKEN, "rawContract.decimals is not a number"
                ) from None
        address = contract.get("address")
        known["native"] = category in NATIVE_CATEGORIES
        if known["native"] and address is not None:
            raise _Kept(UnmatchedReason.UNKNOWN_TOKEN, "a native transfer names a contract")
        if not known["native"]:
            if not isinstance(address, str) or EVM_ADDRESS.fullmatch(address) is None:
                known["contract"] = _text(address)
                raise _Kept(UnmatchedReason.UNKNOWN_TOKEN, "token transfer without a contract")
            known["contract"] = address.lower()
        if units == 0:
            raise _Kept(UnmatchedReason.ZERO_VALUE, "nothing was transferred")
    except _Kept as kept:
        return ProviderEvent(**known, problem=kept.reason, detail=kept.detail)
    return ProviderEvent(**known)


def parse_alchemy(payload: dict[str, Any]) -> list[ProviderEvent]:
    """One event per activity of an Address Activity webhook, in delivery order."""
    event = payload.get("event")
    network = event.get("network") if isinstance(event, dict) else None
    chain = _text(network) or "UNKNOWN"
    activities = event.get("activity") if isinstance(event, dict) else None
    # No count limit: PROVIDER_MAX_BODY_BYTES bounds a delivery. A count limit kept a
    # whole delivery of 501 activities as one `invalid` row, crediting none of them.
    if not isinstance(activities, list):
        return [_kept_whole(payload, chain, ALCHEMY, "event.activity must be an array")]
    return [_alchemy_activity(item, index, chain) for index, item in enumerate(activities)]


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


def parse_payload(payload: object, default_chain: str) -> list[ProviderEvent]:
    """Dispatch on the payload's shape; a shape that is neither is kept whole for review."""
    if isinstance(payload, dict) and payload.get("type") == "ADDRESS_ACTIVITY":
        events = parse_alchemy(payload)
    elif isinstance(payload, dict) and "event_id" in payload:
        events = [parse_generic(payload, default_chain)]
    else:
        detail = "body is neither a generic event nor an Alchemy ADDRESS_ACTIVITY"
        events = [_kept_whole(payload, default_chain, GENERIC, detail)]
    return separate_repeats(events)
