"""payflow's generic provider event: one event per delivery.

`{event_id, event_type, to_address, asset, amount, tx_hash}` with optional `chain` and
`contract_address` (required for a token, absent for the chain's native asset);
`amount` is a decimal string. Its ids live in the `generic` namespace
(`payflow.ingress.ids`). A body is this format when it is an object with `event_id`.
"""

from __future__ import annotations

import re
from typing import Any

from payflow.ingress.ids import GENERIC, namespaced, review_id
from payflow.ingress.payloads import (
    EVM_ADDRESS,
    TX_HASH,
    Kept,
    ProviderEvent,
    UnmatchedReason,
    checked_address,
    checked_chain,
    claimed_text,
)
from payflow.ingress.rawjson import fingerprint, safe_json
from payflow.ledger.records import EventType

NAME = GENERIC
ASSET = re.compile(r"[A-Z0-9]{2,12}", re.ASCII)
PROVIDER_EVENT_TYPES = frozenset({EventType.DEPOSIT, EventType.AIRDROP})


def claims(payload: dict[str, Any]) -> bool:
    """True for a body of this format: an object naming its `event_id`."""
    return "event_id" in payload


def parse(payload: dict[str, Any], default_chain: str) -> list[ProviderEvent]:
    """The delivery's one event (`parse_generic`)."""
    return [parse_generic(payload, default_chain)]


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
        "chain": claimed_text(chain_raw) or default_chain,
        "position": 0,
        "fingerprint": digest,
        "payload": safe_json(payload),
        "to_address": claimed_text(payload.get("to_address")),
        "asset": claimed_text(payload.get("asset")),
        "contract": claimed_text(payload.get("contract_address")),
        "amount": claimed_text(payload.get("amount")),
        "tx_hash": claimed_text(payload.get("tx_hash")),
    }
    try:
        if provider_id is None:
            raise Kept(UnmatchedReason.INVALID, "event_id is required and must be a string")
        chain = checked_chain(chain_raw)
        raw_type = payload.get("event_type")
        if not isinstance(raw_type, str) or raw_type not in PROVIDER_EVENT_TYPES:
            raise Kept(UnmatchedReason.INVALID, "event_type must be one of: airdrop, deposit")
        to_address = checked_address(payload.get("to_address"), "to_address")
        asset = payload.get("asset")
        if not isinstance(asset, str) or ASSET.fullmatch(asset) is None:
            raise Kept(UnmatchedReason.INVALID, "asset must match ^[A-Z0-9]{2,12}$")
        amount = payload.get("amount")
        if not isinstance(amount, str):
            raise Kept(UnmatchedReason.INVALID, "amount must be a decimal string")
        tx_hash = payload.get("tx_hash")
        if not isinstance(tx_hash, str) or TX_HASH.fullmatch(tx_hash) is None:
            raise Kept(UnmatchedReason.INVALID, "tx_hash must match ^[0-9A-Za-z]{8,128}$")
        contract_raw = payload.get("contract_address")
        contract = None
        if contract_raw is not None:
            if not isinstance(contract_raw, str) or EVM_ADDRESS.fullmatch(contract_raw) is None:
                raise Kept(UnmatchedReason.UNKNOWN_TOKEN, "contract_address is not an address")
            contract = contract_raw.lower()
    except Kept as kept:
        return ProviderEvent(**known, problem=kept.reason, detail=kept.detail)
    known.update(chain=chain, to_address=to_address, contract=contract, tx_hash=tx_hash.lower())
    return ProviderEvent(**known, event_type=EventType(raw_type), native=contract is None)
