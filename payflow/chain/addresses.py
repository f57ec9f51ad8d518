"""EVM addresses chosen by outside parties, checked before money depends on them.

A mixed-case address carries an EIP-55 checksum; a wallet refuses one whose checksum is
wrong, because that is almost always a typo, and a payout to a mistyped address is lost
for good. payflow does the same, and refuses the zero address (no one holds its key).
All-lower-case and all-upper-case addresses carry no checksum and are accepted.
"""

from __future__ import annotations

import re

from eth_utils.address import to_checksum_address

EVM_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}", re.ASCII)
ZERO_ADDRESS = "0x" + "0" * 40


def checked_evm_address(raw: str) -> str:
    """The lower-case form of `raw`, a `0x` + 40 hex digit address.

    Raises `ValueError` (with a message fit for a client) when `raw` is not that shape,
    is mixed-case but not its EIP-55 checksum form, or is the zero address.
    """
    if EVM_ADDRESS.fullmatch(raw) is None:
        raise ValueError("must be 0x followed by 40 hex digits")
    digits = raw[2:]
    if digits != digits.lower() and digits != digits.upper() and raw != to_checksum_address(raw):
        raise ValueError(
            "fails its EIP-55 checksum (mixed case that is not the checksum form:"
            " a mistyped address?); send it all lower-case to skip the check"
        )
    lowered = raw.lower()
    if lowered == ZERO_ADDRESS:
        raise ValueError("is the zero address, which no one can spend from")
    return lowered
