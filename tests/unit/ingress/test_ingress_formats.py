"""Signature checks, body decoding, provider id namespaces and payload parsing (pure)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from payflow.config import SettingsError, load_settings
from payflow.ingress.formats import parse_payload
from payflow.ingress.ids import MAX_EVENT_ID_LENGTH, namespaced
from payflow.ingress.payloads import UnmatchedReason
from payflow.ingress.rawjson import NotJson, decode_body, safe_json, safe_text
from payflow.ingress.signature import require_secret, sign, verify
from tests.integration.ingress.alchemy import (
    USDC_CONTRACT,
    eth_activity,
    internal_activity,
    nft_activity,
    token_activity,
    webhook,
)

SECRET = b"s" * 32
TO = "0x" + "ab" * 20


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


def test_alchemy_units_are_exact_integers_and_claims_are_kept_apart() -> None:
    raw = 2**200 + 1
    [event] = parse_payload(webhook(token_activity(TO, raw, decimals=18)), "ETH_MAINNET")
    assert event.units == raw and event.amount is None
    assert (event.contract, event.asset, event.decimals) == (USDC_CONTRACT, "USDC", 18)
    assert event.problem is None and not event.native
    [eth] = parse_payload(webhook(eth_activity(TO, 1)), "ETH_MAINNET")
    assert (eth.units, eth.native, eth.contract) == (1, True, None)
    assert eth.event_id == "alchemy:0x" + "5b" * 32 + ":external"


def test_alchemy_ids_are_normalised_lower_case() -> None:
    activity = token_activity("0x" + "AB" * 20, 10, tx_hash="0x" + "AA" * 32, log_index=3)
    [event] = parse_payload(webhook(activity), "ETH_MAINNET")
    assert event.event_id == "alchemy:0x" + "aa" * 32 + ":3"
    assert event.to_address == TO


def test_generic_ids_live_in_their_own_namespace() -> None:
    base = {
        "event_type": "deposit",
        "to_address": TO,
        "asset": "USDC",
        "amount": "1",
        "tx_hash": "0x" + "cd" * 32,
    }
    payment_id = "payment:7d6f0a52-3f0e-4b8e-9d3c-1d2b6b1f4a11"
    [event] = parse_payload({**base, "event_id": payment_id}, "ETH_MAINNET")
    assert event.event_id == "gen:" + payment_id and event.problem is None
    long_id = "x" * 500
    [hashed] = parse_payload({**base, "event_id": long_id}, "ETH_MAINNET")
    assert hashed.event_id.startswith("gen-sha256:") and hashed.problem is None
    assert len(hashed.event_id) <= MAX_EVENT_ID_LENGTH
    [nul] = parse_payload({**base, "event_id": "wd:\x00x"}, "ETH_MAINNET")
    assert nul.event_id.startswith("gen-sha256:") and "\x00" not in nul.event_id
    for unreadable in ("a/b", "café", "a b", "\ud800"):
        assert namespaced("gen", unreadable).startswith("gen-sha256:")
    assert namespaced("gen", "a" * 196) == "gen:" + "a" * 196
    assert namespaced("gen", "a" * 197) != namespaced("gen", "a" * 198)
    assert namespaced("gen", "a" * 197).startswith("gen-sha256:")


def test_nft_zero_value_and_removed_logs_are_kept_with_their_reason() -> None:
    zero = token_activity(TO, 0, log_index=9)
    removed = token_activity(TO, 5, log_index=10, removed=True)
    erc1155 = {**token_activity(TO, 1, log_index=11), "erc1155Metadata": [{"tokenId": "0x1"}]}
    events = parse_payload(webhook(nft_activity(TO), zero, removed, erc1155), "ETH_MAINNET")
    assert [event.problem for event in events] == [
        UnmatchedReason.NFT,
        UnmatchedReason.ZERO_VALUE,
        UnmatchedReason.REMOVED,
        UnmatchedReason.NFT,
    ]


def test_internal_transfers_without_trace_address_never_collapse() -> None:
    tx = "0x" + "9c" * 32
    one = internal_activity(TO, 10**18, tx_hash=tx, trace=None)
    two = internal_activity(TO, 2 * 10**18, tx_hash=tx, trace=None)
    first, second = parse_payload(webhook(one, two), "ETH_MAINNET")
    assert first.problem is second.problem is None
    assert first.event_id != second.event_id
    assert first.event_id.startswith(f"alchemy:{tx}:internal:")
    # The same transfer twice in one transaction: the second is kept for review.
    again = parse_payload(webhook(one, one), "ETH_MAINNET")
    assert again[0].problem is None
    assert again[1].problem is UnmatchedReason.AMBIGUOUS_ID
    assert again[1].event_id.startswith("alchemy-review:")
    assert [e.event_id for e in parse_payload(webhook(one, one), "ETH_MAINNET")] == [
        e.event_id for e in again
    ]
    # With trace addresses they are told apart by them.
    traced = parse_payload(
        webhook(
            internal_activity(TO, 1, tx_hash=tx, trace="CALL_0"),
            internal_activity(TO, 1, tx_hash=tx, trace="CALL_1"),
        ),
        "ETH_MAINNET",
    )
    assert [e.event_id for e in traced] == [f"alchemy:{tx}:call_0", f"alchemy:{tx}:call_1"]


def test_a_repeated_log_with_other_content_is_ambiguous_and_an_exact_repeat_is_not() -> None:
    original = token_activity(TO, 5, log_index=7)
    forged = token_activity(TO, 5_000_000, log_index=7)
    events = parse_payload(webhook(original, original, forged), "ETH_MAINNET")
    assert [e.problem for e in events] == [None, None, UnmatchedReason.AMBIGUOUS_ID]
    assert events[0].event_id == events[1].event_id != events[2].event_id


@pytest.mark.parametrize(
    ("activity", "reason"),
    [
        pytest.param("not an object", UnmatchedReason.INVALID, id="string-activity"),
        pytest.param(None, UnmatchedReason.INVALID, id="null-activity"),
        pytest.param({**token_activity(TO, 1), "hash": None}, UnmatchedReason.INVALID, id="hash"),
        pytest.param(
            {**token_activity(TO, 1), "rawContract": {"rawValue": "12", "address": USDC_CONTRACT}},
            UnmatchedReason.INVALID,
            id="decimal-raw-value",
        ),
        pytest.param({**token_activity(TO, 1), "toAddress": 7}, UnmatchedReason.INVALID, id="to"),
        pytest.param(
            {**token_activity(TO, 1), "rawContract": {"rawValue": "0x1", "address": None}},
            UnmatchedReason.UNKNOWN_TOKEN,
            id="token-without-contract",
        ),
        pytest.param(
            {**eth_activity(TO, 1), "rawContract": {"rawValue": "0x1", "address": USDC_CONTRACT}},
            UnmatchedReason.UNKNOWN_TOKEN,
            id="native-with-contract",
        ),
        pytest.param(
            {**token_activity(TO, 1), "category": "weird"},
            UnmatchedReason.UNSUPPORTED,
            id="category",
        ),
    ],
)
def test_malformed_activities_are_kept_never_raised(activity: Any, reason: str) -> None:
    good = token_activity(TO, 7_000_000, log_index=1)
    events = parse_payload(webhook(good, activity), "ETH_MAINNET")
    assert events[0].problem is None
    assert events[1].problem == reason
    assert len(events[1].event_id) <= MAX_EVENT_ID_LENGTH
    assert parse_payload(webhook(good, activity), "ETH_MAINNET")[1].event_id == events[1].event_id


@pytest.mark.parametrize(
    "payload",
    [[], {}, {"type": "ADDRESS_ACTIVITY"}, {"type": "ADDRESS_ACTIVITY", "event": []}, 5, None],
)
def test_unknown_shapes_are_one_invalid_event(payload: object) -> None:
    [event] = parse_payload(payload, "ETH_MAINNET")
    assert event.problem is UnmatchedReason.INVALID
    assert event.event_id.startswith(("gen-review:", "alchemy-review:"))


def test_bodies_json_allows_are_decoded_and_made_storable() -> None:
    body = (
        b'{"s": "a\\u0000b", "lone": "\\ud800", "big": 1e999,'
        b' "wide": 123456789012345678901234567890}'
    )
    decoded = decode_body(body)
    assert decoded["s"] == "a\x00b" and decoded["lone"] == "\ud800"
    assert decoded["big"] == Decimal("1e999")
    assert decoded["wide"] == 123456789012345678901234567890
    stored = safe_json(decoded)
    assert stored == {
        "s": "a\\u0000b",
        "lone": "\\ud800",
        "big": "1E+999",
        "wide": "123456789012345678901234567890",
    }
    # Alone, a wide integer is kept too (orjson alone would have made a float of it).
    assert decode_body(b'{"wide": 18446744073709551616}') == {"wide": 2**64}
    orjson.dumps(stored)  # the JSONB codec accepts it
    assert safe_text("x\x00y", 2) == "x\\"
    assert safe_text("plain") == "plain"


@pytest.mark.parametrize("body", [b"not json", b'{"a": NaN}', b"\xff\xfe", b"", b'{"a": 1'])
def test_bytes_that_are_not_json_are_refused(body: bytes) -> None:
    with pytest.raises(NotJson):
        decode_body(body)


def test_deeply_nested_json_is_kept_without_recursion_errors() -> None:
    inner = b"[" * 900 + b"]" * 900
    body = (
        b'{"type":"ADDRESS_ACTIVITY","event":{"network":"ETH_MAINNET","activity":['
        + inner
        + b', {"asset":'
        + inner
        + b', "category":"token", "hash": "0x'
        + b"ab" * 32
        + b'"}]}}'
    )
    events = parse_payload(decode_body(body), "ETH_MAINNET")
    assert [e.problem for e in events] == [UnmatchedReason.INVALID, UnmatchedReason.INVALID]
    assert "nested deeper than" in orjson.dumps(events[0].payload).decode()
    # Beyond the bound, on orjson's path and on the standard decoder's (a lone
    # surrogate sends a document there), whatever the interpreter's recursion limit.
    for prefix in (b"", b'["\\ud800", '):
        for depth in (1025, 5000, 1_000_000):
            body = prefix + b"[" * depth + b"]" * depth + (b"]" if prefix else b"")
            with pytest.raises(NotJson):
                decode_body(body)
    kept = decode_body(b'["\\ud800", ' + b"[" * 1000 + b"]" * 1000 + b"]")
    assert kept[0] == "\ud800"


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(st.characters(exclude_categories=()), max_size=20)  # NUL, lone surrogates
    | st.sampled_from(["0x", "0x1", "token", "internal", "external", TO, USDC_CONTRACT]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "hash",
                    "toAddress",
                    "asset",
                    "category",
                    "rawContract",
                    "rawValue",
                    "address",
                    "decimals",
                    "log",
                    "logIndex",
                    "removed",
                    "erc721TokenId",
                    "typeTraceAddress",
                    "event_id",
                    "event_type",
                    "amount",
                    "x",
                ]
            ),
            children,
            max_size=6,
        )
    ),
    max_leaves=20,
)


def _storable(text: str | None) -> bool:
    """TEXT-storable: valid UTF-8 (no lone surrogates) without NUL."""
    if text is None:
        return True
    text.encode("utf-8")  # raises on a lone surrogate
    return "\x00" not in text


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(activities=st.lists(_JSON, max_size=4), generic_body=_JSON)
def test_parsing_never_raises_and_every_field_is_storable(
    activities: list[Any], generic_body: Any
) -> None:
    payloads = [
        webhook(*activities),
        generic_body,
        {"event_id": "e", **(generic_body or {})}
        if isinstance(generic_body, dict)
        else generic_body,
    ]
    for payload in payloads:
        for event in parse_payload(payload, "ETH_MAINNET"):
            assert 1 <= len(event.event_id) <= MAX_EVENT_ID_LENGTH
            for text in (
                event.event_id,
                event.chain,
                event.to_address,
                event.asset,
                event.contract,
                event.amount,
                event.tx_hash,
                event.detail,
            ):
                assert _storable(text)
            orjson.dumps(event.payload)  # the JSONB codec accepts it
            assert event.problem is not None or event.units is not None or event.amount


def test_an_id_without_trace_address_survives_reformatting() -> None:
    tx = "0x" + "9c" * 32
    plain = internal_activity(TO, 10**18, tx_hash=tx, trace=None)
    shouted = {
        **plain,
        "toAddress": TO.upper().replace("0X", "0x"),
        "fromAddress": plain["fromAddress"].upper().replace("0X", "0x"),
        "rawContract": {"rawValue": "0x" + format(10**18, "064x"), "address": None},
    }
    [first] = parse_payload(webhook(plain), "ETH_MAINNET")
    [second] = parse_payload(webhook(shouted), "ETH_MAINNET")
    assert first.event_id == second.event_id and not first.distinct
