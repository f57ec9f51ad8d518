"""Provider payload formats, turned into `ProviderEvent`s.

Two formats are accepted, both already authenticated by their HMAC signature:

- payflow's generic event: `{event_id, event_type, to_address, asset, amount, tx_hash}`
  with an optional `chain`; `amount` is a decimal string.
- Alchemy "Address Activity": `{type: "ADDRESS_ACTIVITY", event: {network, activity: [...]}}`;
  each activity is one event, its amount is `rawContract.rawValue` (hex base units)
  scaled by `rawContract.decimals` in exact integer arithmetic.

Neither format names an account: the address is mapped through `deposit_addresses`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from payflow.errors import BadInput
from payflow.ledger.records import EventType
from payflow.money import format_amount, from_base_units

EVM_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}", re.ASCII)
OTHER_ADDRESS = re.compile(r"[1-9A-HJ-NP-Za-km-z]{8,128}", re.ASCII)
CHAIN = re.compile(r"[A-Z0-9_]{2,40}", re.ASCII)
ASSET = re.compile(r"[A-Z0-9]{2,12}", re.ASCII)
TX_HASH = re.compile(r"[0-9A-Za-z]{8,128}", re.ASCII)
HEX_QUANTITY = re.compile(r"0x[0-9a-fA-F]{1,80}", re.ASCII)
PROVIDER_EVENT_TYPES = frozenset({EventType.DEPOSIT, EventType.AIRDROP})
FUNGIBLE_CATEGORIES = frozenset({"external", "internal", "token", "erc20"})
MAX_EVENT_ID_LENGTH = 200


class InvalidPayload(BadInput):
    """The signed body is not a valid provider payload; `field` names the offending part."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(f"{field_path}: {message}")
        self.field = field_path
        self.message = message


@dataclass(frozen=True, slots=True)
class ProviderEvent:
    """One credit reported by a provider. `unsupported` holds a reason when it cannot post."""

    event_id: str
    event_type: EventType
    chain: str
    to_address: str
    asset: str | None
    amount: str | None
    tx_hash: str | None
    raw: dict[str, Any] = field(repr=False)
    unsupported: str | None = None


def normalise_address(raw: object, field_path: str) -> str:
    """An address in its canonical form: EVM hex lower-cased, others (base58) unchanged."""
    if not isinstance(raw, str):
        raise InvalidPayload(field_path, "must be a string")
    if EVM_ADDRESS.fullmatch(raw):
        return raw.lower()
    if OTHER_ADDRESS.fullmatch(raw):
        return raw
    raise InvalidPayload(field_path, "is not a valid address")


def _string(payload: dict[str, Any], name: str, pattern: re.Pattern[str] | None = None) -> str:
    value = payload.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidPayload(name, "is required and must be a non-empty string")
    if pattern is not None and pattern.fullmatch(value) is None:
        raise InvalidPayload(name, "has an invalid format")
    return value


def parse_generic(payload: dict[str, Any], default_chain: str) -> ProviderEvent:
    """Validate payflow's generic provider event (the amount stays a string here)."""
    event_id = _string(payload, "event_id")
    if len(event_id) > MAX_EVENT_ID_LENGTH:
        raise InvalidPayload("event_id", f"must be at most {MAX_EVENT_ID_LENGTH} characters")
    raw_type = _string(payload, "event_type")
    if raw_type not in PROVIDER_EVENT_TYPES:
        raise InvalidPayload("event_type", "must be one of: airdrop, deposit")
    amount = payload.get("amount")
    if not isinstance(amount, str):
        raise InvalidPayload("amount", "must be a decimal string, not a JSON number")
    chain = payload.get("chain", default_chain)
    if not isinstance(chain, str) or CHAIN.fullmatch(chain) is None:
        raise InvalidPayload("chain", "must match ^[A-Z0-9_]{2,40}$")
    return ProviderEvent(
        event_id=event_id,
        event_type=EventType(raw_type),
        chain=chain,
        to_address=normalise_address(payload.get("to_address"), "to_address"),
        asset=_string(payload, "asset", ASSET),
        amount=amount,
        tx_hash=_string(payload, "tx_hash", TX_HASH).lower(),
        raw=payload,
    )


def _hex_int(raw: object, field_path: str) -> int:
    if isinstance(raw, bool):
        raise InvalidPayload(field_path, "must be an integer or a hex string")
    if isinstance(raw, int):
        if raw < 0:
            raise InvalidPayload(field_path, "must not be negative")
        return raw
    if isinstance(raw, str) and HEX_QUANTITY.fullmatch(raw):
        return int(raw, 16)
    raise InvalidPayload(field_path, "must be an integer or a 0x-prefixed hex string")


def alchemy_event_id(tx_hash: str, log_index: int | None, activity: dict[str, Any]) -> str:
    """A stable id per activity: tx hash plus log index (token) or trace position (ETH)."""
    if log_index is not None:
        return f"alchemy:{tx_hash}:{log_index}"
    trace = activity.get("typeTraceAddress")
    if isinstance(trace, str) and trace:
        return f"alchemy:{tx_hash}:{trace.lower()}"[:MAX_EVENT_ID_LENGTH]
    category = activity.get("category")
    return f"alchemy:{tx_hash}:{category if isinstance(category, str) else 'external'}"


def _alchemy_activity(activity: object, index: int, chain: str) -> ProviderEvent | None:
    where = f"event.activity[{index}]"
    if not isinstance(activity, dict):
        raise InvalidPayload(where, "must be an object")
    log = activity.get("log")
    if isinstance(log, dict) and log.get("removed") is True:
        return None  # a reorged log: nothing was transferred
    tx_hash = activity.get("hash")
    if not isinstance(tx_hash, str) or TX_HASH.fullmatch(tx_hash) is None:
        raise InvalidPayload(f"{where}.hash", "is required and must be a hex string")
    tx_hash = tx_hash.lower()
    log_index = (
        _hex_int(log["logIndex"], f"{where}.log.logIndex")
        if isinstance(log, dict) and ("logIndex" in log)
        else None
    )
    event_id = alchemy_event_id(tx_hash, log_index, activity)
    to_address = normalise_address(activity.get("toAddress"), f"{where}.toAddress")
    asset_raw = activity.get("asset")
    asset = asset_raw.upper() if isinstance(asset_raw, str) and asset_raw else None
    if asset is not None and ASSET.fullmatch(asset) is None:
        asset = None
    category = activity.get("category")
    common: dict[str, Any] = {
        "event_id": event_id,
        "event_type": EventType.DEPOSIT,
        "chain": chain,
        "to_address": to_address,
        "asset": asset,
        "tx_hash": tx_hash,
        "raw": activity,
    }
    if category not in FUNGIBLE_CATEGORIES:
        return ProviderEvent(amount=None, unsupported="unsupported", **common)
    contract = activity.get("rawContract")
    if not isinstance(contract, dict):
        raise InvalidPayload(f"{where}.rawContract", "is required and must be an object")
    units = _hex_int(contract.get("rawValue"), f"{where}.rawContract.rawValue")
    decimals = _hex_int(contract.get("decimals", 18), f"{where}.rawContract.decimals")
    if decimals > 77:
        raise InvalidPayload(f"{where}.rawContract.decimals", "must be at most 77")
    if units == 0:
        return ProviderEvent(amount=None, unsupported="unsupported", **common)
    amount = format_amount(from_base_units(units, decimals))
    if asset is None:
        return ProviderEvent(amount=amount, unsupported="unknown_asset", **common)
    return ProviderEvent(amount=amount, **common)


def parse_alchemy(payload: dict[str, Any]) -> list[ProviderEvent]:
    """Turn an Address Activity webhook into one event per (non-reorged) activity."""
    event = payload.get("event")
    if not isinstance(event, dict):
        raise InvalidPayload("event", "is required and must be an object")
    network = event.get("network")
    if not isinstance(network, str) or CHAIN.fullmatch(network) is None:
        raise InvalidPayload("event.network", "must match ^[A-Z0-9_]{2,40}$")
    activities = event.get("activity")
    if not isinstance(activities, list) or not activities:
        raise InvalidPayload("event.activity", "must be a non-empty array")
    if len(activities) > 500:
        raise InvalidPayload("event.activity", "must hold at most 500 activities")
    parsed = (_alchemy_activity(item, index, network) for index, item in enumerate(activities))
    return [item for item in parsed if item is not None]


def parse_payload(payload: object, default_chain: str) -> list[ProviderEvent]:
    """Dispatch on the payload's shape; `InvalidPayload` for anything else."""
    if not isinstance(payload, dict):
        raise InvalidPayload("body", "must be a JSON object")
    if payload.get("type") == "ADDRESS_ACTIVITY":
        return parse_alchemy(payload)
    if "event_id" in payload:
        return [parse_generic(payload, default_chain)]
    raise InvalidPayload("body", "is neither a generic event nor an Alchemy ADDRESS_ACTIVITY")
