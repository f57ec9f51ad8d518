"""The pure parts of the `eth_getLogs` checks: which provider errors are size limits,
and what an Ethereum logs bloom can and cannot hold."""

from __future__ import annotations

import pytest
from eth_hash.auto import keccak

from payflow.chain.rpc import RpcError
from payflow.chain.transfers import TRANSFER_TOPIC
from payflow.chain.watch.logs import bloom_contains, is_limit_error, may_hold_transfer


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (-32005, "query returned more than 10000 results"),
        (-32602, "block range is too large"),
        (-32000, "exceed maximum block range: 2000"),
        (
            -32600,
            "Log response size exceeded. You can make eth_getLogs requests with up to a 2K"
            " block range",
        ),
        (-32005, "limit exceeded"),
    ],
)
def test_provider_size_refusals_are_limit_errors(code: int, message: str) -> None:
    assert is_limit_error(RpcError("eth_getLogs", code, message))


def test_other_errors_are_not_split_on() -> None:
    assert not is_limit_error(RpcError("eth_getLogs", -32000, "header not found"))
    assert not is_limit_error(RpcError("eth_getLogs", -32601, "method not found"))


def _bloom(*items: bytes) -> bytes:
    bloom = bytearray(256)
    for item in items:
        digest = keccak(item)
        for i in (0, 2, 4):
            bit = ((digest[i] << 8) | digest[i + 1]) & 2047
            bloom[255 - bit // 8] |= 1 << (bit % 8)
    return bytes(bloom)


def test_a_bloom_holds_what_was_added_and_says_no_for_the_rest() -> None:
    token = "0x" + "11" * 20
    ours = "0x" + "0" * 24 + "22" * 20
    other = "0x" + "0" * 24 + "33" * 20
    bloom = _bloom(
        bytes.fromhex(token[2:]), bytes.fromhex(TRANSFER_TOPIC[2:]), bytes.fromhex(ours[2:])
    )
    assert bloom_contains(bloom, bytes.fromhex(ours[2:]))
    assert not bloom_contains(bloom, bytes.fromhex(other[2:]))
    text = "0x" + bloom.hex()
    assert may_hold_transfer(text, [token], TRANSFER_TOPIC, [other, ours])
    assert not may_hold_transfer(text, [token], TRANSFER_TOPIC, [other])
    assert not may_hold_transfer("0x" + "00" * 256, [token], TRANSFER_TOPIC, [ours])
    assert may_hold_transfer(None, [token], TRANSFER_TOPIC, [ours])  # no bloom: ask
