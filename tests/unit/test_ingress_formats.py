"""Signature checks and provider payload parsing (pure, no services)."""

from __future__ import annotations

import pytest

from payflow.config import SettingsError, load_settings
from payflow.ingress.payloads import InvalidPayload, parse_payload
from payflow.ingress.signature import require_secret, sign, verify
from tests.integration.api.alchemy import eth_activity, token_activity, webhook

SECRET = b"s" * 32


def test_verify_accepts_only_the_exact_signature() -> None:
    body = b'{"a": 1}'
    good = sign(body, SECRET)
    assert verify(body, good, SECRET)
    assert verify(body, good.upper(), SECRET)
    for bad in (None, "", good[:-1], good + "0", "g" * 64, "é" * 64, sign(body + b" ", SECRET)):
        assert not verify(body, bad, SECRET)
    assert not verify(body, sign(body, b"t" * 32), SECRET)


def test_require_secret() -> None:
    with pytest.raises(SettingsError, match="missing"):
        require_secret(load_settings(provider_webhook_secret=None))
    assert require_secret(load_settings(provider_webhook_secret="x" * 32)) == b"x" * 32


def test_alchemy_amounts_are_exact() -> None:
    to = "0x" + "ab" * 20
    raw = 2**200 + 1
    events = parse_payload(webhook(token_activity(to, raw, decimals=18)), "ETH_MAINNET")
    digits = str(raw)
    assert events[0].amount == digits[:-18] + "." + digits[-18:]
    events = parse_payload(webhook(eth_activity(to, 1)), "ETH_MAINNET")
    assert events[0].amount == "0.000000000000000001"
    assert events[0].event_id == "alchemy:0x" + "5b" * 32 + ":external"


def test_alchemy_ids_are_normalised_lower_case() -> None:
    to = "0x" + "AB" * 20
    activity = token_activity(to, 10, tx_hash="0x" + "AA" * 32, log_index=3)
    event = parse_payload(webhook(activity), "ETH_MAINNET")[0]
    assert event.event_id == "alchemy:0x" + "aa" * 32 + ":3"
    assert event.to_address == "0x" + "ab" * 20


def test_alchemy_nft_and_zero_value_are_unsupported() -> None:
    to = "0x" + "ab" * 20
    nft = {**token_activity(to, 1), "category": "erc721"}
    zero = token_activity(to, 0, log_index=9)
    events = parse_payload(webhook(nft, zero), "ETH_MAINNET")
    assert [event.unsupported for event in events] == ["unsupported", "unsupported"]


@pytest.mark.parametrize(
    "payload",
    [
        [],
        {},
        {"type": "ADDRESS_ACTIVITY"},
        {"type": "ADDRESS_ACTIVITY", "event": {"network": "eth", "activity": [{}]}},
        {"type": "ADDRESS_ACTIVITY", "event": {"network": "ETH_MAINNET", "activity": []}},
        webhook({**token_activity("0x" + "ab" * 20, 1), "rawContract": {"rawValue": "12"}}),
        webhook({**token_activity("0x" + "ab" * 20, 1), "hash": None}),
    ],
)
def test_malformed_payloads_raise_invalid_payload(payload: object) -> None:
    with pytest.raises(InvalidPayload):
        parse_payload(payload, "ETH_MAINNET")
