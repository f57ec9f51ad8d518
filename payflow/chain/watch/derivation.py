"""Deposit addresses derived from a watch-only extended public key.

`ETH_DEPOSIT_XPUB` is the ACCOUNT-level xpub of m/44'/60'/a' (BIP-32/BIP-44, depth 3, a
hardened index); address i is its non-hardened child 0/i, i.e. m/44'/60'/a'/0/i, the
path wallets (and anvil's default mnemonic, a = 0) use. The key is checked whole when the
settings load (`account_key`): base58check of 78 bytes, the version bytes of an xpub or a
tpub (a private key's are refused, never echoed), depth 3 with a hardened index (a key of
another level, such as the change level m/44'/60'/a'/0 some wallets export, would derive
addresses the owner's wallet never scans), a public key on secp256k1. Only public
derivation happens here, so no private key ever sits on the server.

The index is kept in PostgreSQL (`deposit_address_counters`, one row per chain) and
allocated in the transaction that inserts the address: concurrent requests serialise
on the counter row and get distinct indexes, and a rolled-back request frees its index.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from uuid import UUID

from bip32 import BIP32  # type: ignore[import-untyped]  # no stubs, no py.typed
from eth_keys.datatypes import PublicKey

from payflow.config.xpub import XpubInvalid as XpubInvalid  # re-exported: the API's 503
from payflow.config.xpub import check_account_xpub
from payflow.db import Connection
from payflow.db.queries import load_queries

SQL = load_queries("payflow.chain.watch")
MAX_INDEX = 2**31 - 1  # non-hardened children only


@dataclass(frozen=True, slots=True)
class DerivedAddress:
    """A derived deposit address: `address` lower-case (as stored), `checksum` EIP-55,
    `path` its BIP-44 path from the account key's own account number."""

    chain: str
    address: str
    checksum: str
    account_id: UUID
    index: int
    path: str  # m/44'/60'/a'/0/index


@dataclass(frozen=True, slots=True)
class AccountKey:
    """A checked account-level extended public key: `account` is a of m/44'/60'/a',
    `kind` its version ("xpub" or "tpub")."""

    node: BIP32
    account: int
    kind: str

    def path(self, index: int) -> str:
        """The BIP-44 path of derived address `index`: m/44'/60'/a'/0/index."""
        return f"m/44'/60'/{self.account}'/0/{index}"


@lru_cache(maxsize=8)
def account_key(xpub: str) -> AccountKey:
    """Parse and check `xpub` as the account-level extended public key payflow derives from
    (`payflow.config.xpub.check_account_xpub`: raises `XpubInvalid` with one line, never
    the key itself)."""
    checked = check_account_xpub(xpub)
    return AccountKey(checked.node, checked.account, checked.kind)


def validate_xpub(xpub: str) -> None:
    """Raise `XpubInvalid` unless `xpub` is an account-level extended public key
    (`account_key`)."""
    account_key(xpub)


def derive_address(xpub: str, index: int) -> str:
    """The EIP-55 address of child 0/`index` of the account-level `xpub`.

    Raises `XpubInvalid` for a bad key and `ValueError` for an index outside 0..2^31-1.
    """
    if not 0 <= index <= MAX_INDEX:
        raise ValueError("derivation index must be in 0..2^31-1")
    pubkey = account_key(xpub).node.get_pubkey_from_path(f"m/0/{index}")
    address: str = PublicKey.from_compressed_bytes(pubkey).to_checksum_address()
    return address


async def allocate_address(
    conn: Connection,
    *,
    chain: str,
    account_id: UUID,
    xpub: str,
    derived_by: UUID | None = None,
    derive_key: str | None = None,
) -> DerivedAddress:
    """Allocate the chain's next index and map its derived address to `account_id`,
    recording the Idempotency-Key (`derive_key` of merchant `derived_by`) that asked.

    The caller owns the transaction (the counter row stays locked until it ends).
    Raises `XpubInvalid`; a unique violation (an imported address equal to the derived
    one, or a key that derived already) propagates and rolls back the index too.
    """
    index: int = await conn.fetchval(SQL["allocate_index"], chain)
    checksum = derive_address(xpub, index)
    row = await conn.fetchrow(
        SQL["insert_derived_address"],
        chain,
        checksum.lower(),
        account_id,
        index,
        derived_by,
        derive_key,
    )
    assert row is not None
    path = account_key(xpub).path(index)
    return DerivedAddress(chain, row["address"], checksum, row["account_id"], index, path)


async def derived_by_key(
    conn: Connection, *, derived_by: UUID, derive_key: str, xpub: str
) -> DerivedAddress | None:
    """The address merchant `derived_by`'s Idempotency-Key `derive_key` derived, if any
    (the domain row that answers a retry once the key's record has expired)."""
    row = await conn.fetchrow(SQL["derived_by_key"], derived_by, derive_key)
    if row is None:
        return None
    index = int(row["derivation_index"])
    checksum = derive_address(xpub, index)
    path = account_key(xpub).path(index)
    return DerivedAddress(row["chain"], row["address"], checksum, row["account_id"], index, path)


async def chain_carries_asset(conn: Connection, chain: str, asset: str) -> bool | None:
    """Whether `asset` is `chain`'s native asset or a token registered on it; None when
    the token registry knows no such chain. Reads in the caller's transaction."""
    carries: bool | None = await conn.fetchval(SQL["chain_carries_asset"], chain, asset)
    return carries
