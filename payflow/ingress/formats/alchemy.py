"""Alchemy "Address Activity" webhooks: one event per activity.

`{type: "ADDRESS_ACTIVITY", event: {network, activity: [...]}}`; each activity is one
event, its amount `rawContract.rawValue` (hex base units), its id derived from the
transaction hash and the field that tells two activities of one transaction apart
(`alchemy` namespace, `payflow.ingress.ids`).
"""

from __future__ import annotations

from typing import Any

from payflow.ingress.ids import ALCHEMY, namespaced, review_id
from payflow.ingress.payloads import (
    EVM_ADDRESS,
    TX_HASH,
    Kept,
    ProviderEvent,
    UnmatchedReason,
    checked_address,
    checked_chain,
    claimed_text,
    hex_quantity,
    kept_whole,
)
from payflow.ingress.rawjson import fingerprint, safe_json

NAME = ALCHEMY
NATIVE_CATEGORIES = frozenset({"external", "internal"})
TOKEN_CATEGORIES = frozenset({"token", "erc20"})
NFT_CATEGORIES = frozenset({"erc721", "erc1155", "specialnft"})


def claims(payload: dict[str, Any]) -> bool:
    """True for a body of this format: `type` is `ADDRESS_ACTIVITY`."""
    return payload.get("type") == "ADDRESS_ACTIVITY"


def parse(payload: dict[str, Any], default_chain: str) -> list[ProviderEvent]:
    """`parse_alchemy`; the chain is the payload's `network`, never `default_chain`."""
    return parse_alchemy(payload)


def _lower(raw: object) -> object:
    return raw.lower() if isinstance(raw, str) else raw


def _alchemy_id(
    tx_hash: str, category: str, log: object, activity: dict[str, Any]
) -> tuple[str, bool]:
    """The stored id of one activity, and whether it carries the field that tells two
    activities of one transaction apart (log index for tokens, trace address for
    internal transfers; a transaction has one external transfer)."""
    if isinstance(log, dict) and log.get("logIndex") is not None:
        index = hex_quantity(log["logIndex"], "log.logIndex")
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
        units: object = hex_quantity(contract.get("rawValue"), "rawValue")
    except Kept:
        units = contract.get("rawValue")
    moved = {
        "from": _lower(activity.get("fromAddress")),
        "to": _lower(activity.get("toAddress")),
        "contract": _lower(contract.get("address")),
        "units": units,
    }
    moved_digest = fingerprint(moved)[:32]
    return namespaced(ALCHEMY, f"{tx_hash}:{claimed_text(category)}:{moved_digest}"), False


def _claimed_units(contract: object, known: dict[str, Any]) -> None:
    """Best effort, for review columns only: the units and decimals a kept activity
    claims (a removed log still shows how much it was about). Never raises."""
    if not isinstance(contract, dict):
        return
    for key, name in (("units", "rawValue"), ("decimals", "decimals")):
        try:
            known[key] = hex_quantity(contract.get(name), name)
        except Kept:
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
            raise Kept(UnmatchedReason.INVALID, f"{where} must be an object")
        known.update(
            to_address=claimed_text(activity.get("toAddress")),
            asset=claimed_text(activity.get("asset")),
            tx_hash=claimed_text(activity.get("hash")),
        )
        checked_chain(chain)
        tx_hash = activity.get("hash")
        if not isinstance(tx_hash, str) or TX_HASH.fullmatch(tx_hash) is None:
            raise Kept(UnmatchedReason.INVALID, f"{where}.hash must be a hex string")
        category_raw = activity.get("category")
        category = category_raw if isinstance(category_raw, str) else ""
        log = activity.get("log")
        known["event_id"], known["distinct"] = _alchemy_id(tx_hash.lower(), category, log, activity)
        known["tx_hash"] = tx_hash.lower()
        known["to_address"] = checked_address(activity.get("toAddress"), f"{where}.toAddress")
        asset = activity.get("asset")
        known["asset"] = claimed_text(asset.upper() if isinstance(asset, str) else asset)
        _claimed_units(activity.get("rawContract"), known)
        if isinstance(log, dict) and log.get("removed") is True:
            raise Kept(UnmatchedReason.REMOVED, "the log was removed by a reorganisation")
        nft = activity.get("erc721TokenId") is not None or activity.get("erc1155Metadata")
        if nft or category in NFT_CATEGORIES:
            raise Kept(UnmatchedReason.NFT, "NFT transfers are not credited")
        if category not in NATIVE_CATEGORIES | TOKEN_CATEGORIES:
            raise Kept(
                UnmatchedReason.UNSUPPORTED,
                f"category {claimed_text(category_raw)} is not credited",
            )
        contract = activity.get("rawContract")
        if not isinstance(contract, dict):
            raise Kept(UnmatchedReason.INVALID, f"{where}.rawContract must be an object")
        units = hex_quantity(contract.get("rawValue"), f"{where}.rawContract.rawValue")
        known["units"] = units
        claimed_decimals = contract.get("decimals")
        if claimed_decimals is not None:
            try:
                known["decimals"] = hex_quantity(claimed_decimals, "decimals")
            except Kept:
                raise Kept(
                    UnmatchedReason.UNKNOWN_TOKEN, "rawContract.decimals is not a number"
                ) from None
        address = contract.get("address")
        known["native"] = category in NATIVE_CATEGORIES
        if known["native"] and address is not None:
            raise Kept(UnmatchedReason.UNKNOWN_TOKEN, "a native transfer names a contract")
        if not known["native"]:
            if not isinstance(address, str) or EVM_ADDRESS.fullmatch(address) is None:
                known["contract"] = claimed_text(address)
                raise Kept(UnmatchedReason.UNKNOWN_TOKEN, "token transfer without a contract")
            known["contract"] = address.lower()
        if units == 0:
            raise Kept(UnmatchedReason.ZERO_VALUE, "nothing was transferred")
    except Kept as kept:
        return ProviderEvent(**known, problem=kept.reason, detail=kept.detail)
    return ProviderEvent(**known)


def parse_alchemy(payload: dict[str, Any]) -> list[ProviderEvent]:
    """One event per activity of an Address Activity webhook, in delivery order."""
    event = payload.get("event")
    network = event.get("network") if isinstance(event, dict) else None
    chain = claimed_text(network) or "UNKNOWN"
    activities = event.get("activity") if isinstance(event, dict) else None
    # No count limit: PROVIDER_MAX_BODY_BYTES bounds a delivery. A count limit kept a
    # whole delivery of 501 activities as one `invalid` row, crediting none of them.
    if not isinstance(activities, list):
        return [kept_whole(payload, chain, ALCHEMY, "event.activity must be an array")]
    return [_alchemy_activity(item, index, chain) for index, item in enumerate(activities)]
