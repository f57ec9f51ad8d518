"""EIP-55 checks on addresses an outside party chooses (payout recipients, imports)."""

from __future__ import annotations

import pytest
from eth_utils.address import to_checksum_address
from hypothesis import given
from hypothesis import strategies as st

from payflow.chain.addresses import checked_evm_address

_ADDRESSES = (
    st.binary(min_size=20, max_size=20)
    .map(lambda b: "0x" + b.hex())
    .filter(lambda a: int(a, 16) != 0)
)


@given(_ADDRESSES)
def test_checksum_lower_and_upper_forms_are_accepted(address: str) -> None:
    for form in (address, to_checksum_address(address), "0x" + address[2:].upper()):
        assert checked_evm_address(form) == address


@given(_ADDRESSES, st.data())
def test_one_flipped_letter_in_a_checksum_address_is_refused(
    address: str, data: st.DataObject
) -> None:
    checksummed = to_checksum_address(address)
    letters = [i for i, c in enumerate(checksummed) if i >= 2 and c.isalpha()]
    if len(letters) < 2:  # flipping the only letter would leave one case: no checksum
        return
    i = data.draw(st.sampled_from(letters))
    typo = checksummed[:i] + checksummed[i].swapcase() + checksummed[i + 1 :]
    digits = typo[2:]
    if digits in (digits.lower(), digits.upper()):
        return
    with pytest.raises(ValueError, match="EIP-55"):
        checked_evm_address(typo)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("0x" + "0" * 40, "zero address"),
        ("0x" + "ab" * 19, "40 hex digits"),
        ("0x" + "zz" * 20, "40 hex digits"),
        ("ab" * 21, "40 hex digits"),
        ("0x52908400098527886E0F7030069857D2E4169EE7"[:-1] + "e", "EIP-55"),
    ],
)
def test_bad_addresses_are_refused(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        checked_evm_address(raw)


def test_the_eip55_examples_pass() -> None:
    for example in (
        "0x52908400098527886E0F7030069857D2E4169EE7",
        "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
        "0xde709f2102306220921060314715629080e2fb77",
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
    ):
        assert checked_evm_address(example) == example.lower()
