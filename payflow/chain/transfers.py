"""The identity of an on-chain transfer, shared by every source that reports one.

A transfer is `(chain, tx hash, position)`: `position` is `NATIVE_POSITION` (-1) for the
transaction's own native value, or the index of the `Transfer` log among the logs of the
transaction's receipt (0-based, counted inside the transaction, not the block). Both
survive re-inclusion of the transaction in another block, unlike a block-level
`logIndex`, so a webhook, an Alchemy activity and the scanner name one transfer alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NATIVE_POSITION = -1
# keccak256("Transfer(address,address,uint256)")
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"

TX_HASH_RE = re.compile(r"^0x[0-9a-f]{64}$")
ADDRESS_RE = re.compile(r"^0x[0-9a-f]{40}$")


def transfer_id(chain: str, tx_hash: str, position: int) -> str:
    """`<chain>:<tx hash, lower case>:<position>`; the deposit's identity everywhere."""
    if not TX_HASH_RE.match(tx_hash.lower()):
        raise ValueError(f"not a transaction hash: {tx_hash!r}")
    if position < NATIVE_POSITION:
        raise ValueError("position is -1 (native) or a log's index inside the transaction")
    return f"{chain}:{tx_hash.lower()}:{position}"


@dataclass(frozen=True, slots=True)
class Transfer:
    """One transfer to one of our addresses, as a source reports it or the node shows it.

    `to_address` and `contract` are lower-case hex; `contract` is None for native value.
    `units` is the amount in the asset's base units (wei, or the token's smallest unit).
    `block_number`/`block_hash` are where the reporter saw it (None when it did not say);
    `block_time` the block's timestamp in Unix seconds when the node's header was read
    (the assignment rule, `payflow.chain.assignment`, compares it).
    """

    chain: str
    tx_hash: str
    position: int
    to_address: str
    contract: str | None
    units: int
    block_number: int | None = None
    block_hash: str | None = None
    block_time: int | None = None

    @property
    def id(self) -> str:
        return transfer_id(self.chain, self.tx_hash, self.position)


def topic_address(topic: str) -> str:
    """The address held in an indexed 32-byte topic, lower-case 0x form."""
    return "0x" + topic[-40:].lower()
