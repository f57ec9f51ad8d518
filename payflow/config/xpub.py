"""The account-level extended public key of derived deposit addresses (`ETH_DEPOSIT_XPUB`),
checked whole when the settings load: base58check of 78 bytes, the version bytes of an
xpub or a tpub (a private key's are refused, never echoed), depth 3 with a hardened index
(a key of another level would derive addresses the owner's wallet never scans), a public
key on secp256k1. `payflow.chain.watch.derivation` derives addresses from the checked key.
"""

from __future__ import annotations

from dataclasses import dataclass

from bip32 import BIP32  # type: ignore[import-untyped]  # no stubs, no py.typed
from bip32.base58 import b58decode_check  # type: ignore[import-untyped]  # the same package

HARDENED = 2**31
ACCOUNT_DEPTH = 3  # m/44'/60'/a'
# BIP-32 version bytes: the public ones accepted (mainnet xpub, testnet tpub: the same key
# material, Ethereum addresses do not depend on it), the private ones refused by name.
PUBLIC_VERSIONS = {0x0488B21E: "xpub", 0x043587CF: "tpub"}
PRIVATE_VERSIONS = {0x0488ADE4: "xprv", 0x04358394: "tprv"}
_LEVELS = {
    0: "the master key m",
    1: "the purpose level m/44'",
    2: "the coin level m/44'/60'",
    4: "the change level m/44'/60'/a'/0",
    5: "an address key m/44'/60'/a'/0/i",
}
EXPECTED = (
    "payflow derives m/44'/60'/a'/0/i from the account-level key at depth 3 "
    "(m/44'/60'/a', the xpub wallets export per account)"
)


class XpubInvalid(ValueError):
    """The configured key is not a usable account-level extended PUBLIC key; the message
    (one line, never the key) completes "ETH_DEPOSIT_XPUB …"."""


@dataclass(frozen=True, slots=True)
class CheckedXpub:
    """An account-level extended public key that passed `check_account_xpub`: its BIP-32
    node, the account a of m/44'/60'/a' and its kind ("xpub" or "tpub")."""

    node: BIP32
    account: int
    kind: str


def check_account_xpub(xpub: str) -> CheckedXpub:
    """Parse and check `xpub` as the account-level extended public key payflow derives from.

    Raises `XpubInvalid` with one line (never the key itself) for: text that is not the
    base58check of 78 bytes, a private key (xprv/tprv), other version bytes (ypub, zpub,
    another coin's), a depth other than 3 (naming the level it is at), a depth-3 key
    whose index is not hardened, a public key that is not a secp256k1 point.
    """
    try:
        raw: bytes = b58decode_check(xpub.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        raise XpubInvalid(
            "is not a BIP-32 extended public key (base58check with a valid checksum)"
        ) from None
    if len(raw) != 78:
        raise XpubInvalid(f"is not a BIP-32 extended key ({len(raw)} bytes, not 78)")
    version = int.from_bytes(raw[:4], "big")
    if version in PRIVATE_VERSIONS:
        raise XpubInvalid(
            f"is an extended PRIVATE key ({PRIVATE_VERSIONS[version]}); give the watch-only"
            " account xpub: no private key belongs on the server"
        )
    if version not in PUBLIC_VERSIONS:
        raise XpubInvalid(
            f"has version bytes 0x{version:08x}, not those of an xpub (0x0488b21e) or a tpub"
            " (0x043587cf)"
        )
    depth, index = raw[4], int.from_bytes(raw[9:13], "big")
    if depth != ACCOUNT_DEPTH:
        level = _LEVELS.get(depth, "no BIP-44 level")
        raise XpubInvalid(f"is a key at depth {depth} ({level}); {EXPECTED}")
    if index < HARDENED:
        raise XpubInvalid(
            f"is a depth-3 key of the non-hardened child {index}; the account level"
            f" m/44'/60'/a' is hardened: {EXPECTED}"
        )
    try:
        node = BIP32.from_xpub(xpub)
    except Exception:  # bip32 raises ValueError or its own ParsingError
        raise XpubInvalid("carries a public key that is not a point on secp256k1") from None
    if node.privkey is not None:  # pragma: no cover - from_xpub never loads a private key
        raise XpubInvalid("must be a public key")
    return CheckedXpub(node, index - HARDENED, PUBLIC_VERSIONS[version])
