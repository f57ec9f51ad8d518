"""`ETH_DEPOSIT_XPUB` is checked whole when the settings load, so every role refuses at
start-up a key payflow would derive the wrong addresses from.

Keys are made from a known seed with `bip32`, the library payflow derives with. The named
case: the change-level key m/44'/60'/1'/0 (depth 4, what some wallets export) was taken
silently and addresses came from m/44'/60'/1'/0/0/i, which the owner's wallet never scans.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from bip32 import BIP32  # type: ignore[import-untyped]  # no stubs, no py.typed
from bip32.base58 import b58encode_check  # type: ignore[import-untyped]  # same package
from eth_keys.datatypes import PrivateKey

from payflow.chain.watch.derivation import account_key, derive_address
from payflow.config import SettingsError, load_settings

SEED = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
ROOT = BIP32.from_seed(SEED)
EXPECTED = "payflow derives m/44'/60'/a'/0/i from the account-level key at depth 3"


def xpub(path: str) -> str:
    key: str = ROOT.get_xpub_from_path(path)
    return key


def reserialize(key: str, *, version: int | None = None, key_bytes: bytes | None = None) -> str:
    """`key` with other version bytes or another 33-byte key, re-checksummed."""
    from bip32.base58 import b58decode_check  # type: ignore[import-untyped]

    raw = bytearray(b58decode_check(key))
    if version is not None:
        raw[:4] = version.to_bytes(4, "big")
    if key_bytes is not None:
        raw[45:] = key_bytes
    encoded: bytes = b58encode_check(bytes(raw))
    return encoded.decode()


def refusal(key: str) -> str:
    with pytest.raises(SettingsError) as refused:
        load_settings(eth_deposit_xpub=key)
    line = str(refused.value)
    assert "\n" not in line and key not in line
    assert line.startswith("setting ETH_DEPOSIT_XPUB is invalid: ")
    return line


@pytest.mark.parametrize(
    ("path", "depth", "level"),
    [
        ("m", 0, "the master key m"),
        ("m/44'", 1, "the purpose level m/44'"),
        ("m/44'/60'", 2, "the coin level m/44'/60'"),
        ("m/44'/60'/1'/0", 4, "the change level m/44'/60'/a'/0"),
        ("m/44'/60'/1'/0/0", 5, "an address key m/44'/60'/a'/0/i"),
        ("m/44'/60'/1'/0/0/7", 6, "no BIP-44 level"),
    ],
)
def test_a_key_at_another_depth_is_refused_naming_the_level_expected(
    path: str, depth: int, level: str
) -> None:
    line = refusal(xpub(path))
    assert f"is a key at depth {depth} ({level}); {EXPECTED}" in line


def test_a_depth_3_key_that_is_not_an_account_level_is_refused() -> None:
    line = refusal(xpub("m/0/1/2"))  # depth 3, but the non-hardened child 2
    assert "non-hardened child 2" in line and EXPECTED in line


@pytest.mark.parametrize("account", [0, 1, 7])
def test_the_account_level_key_derives_the_wallets_own_addresses(account: int) -> None:
    key = xpub(f"m/44'/60'/{account}'")
    assert load_settings(eth_deposit_xpub=key).eth_deposit_xpub == key
    checked = account_key(key)
    assert (checked.account, checked.kind) == (account, "xpub")
    for index in (0, 1, 5):
        path = f"m/44'/60'/{account}'/0/{index}"
        private = PrivateKey(ROOT.get_privkey_from_path(path))
        assert derive_address(key, index) == private.public_key.to_checksum_address()
        assert checked.path(index) == path


def test_the_change_level_key_would_have_derived_addresses_the_wallet_never_scans() -> None:
    """What the refusal prevents: the depth-4 key's child 0/i is m/44'/60'/1'/0/0/i."""
    change = BIP32.from_xpub(xpub("m/44'/60'/1'/0"))
    wrong = PrivateKey(ROOT.get_privkey_from_path("m/44'/60'/1'/0/0/0")).public_key
    right = PrivateKey(ROOT.get_privkey_from_path("m/44'/60'/1'/0/0")).public_key
    derived = change.get_pubkey_from_path("m/0/0")
    assert derived == wrong.to_compressed_bytes() != right.to_compressed_bytes()


def test_a_testnet_tpub_of_the_account_level_is_accepted() -> None:
    tpub = BIP32.from_seed(SEED, network="test").get_xpub_from_path("m/44'/60'/0'")
    assert tpub.startswith("tpub")
    assert account_key(tpub).kind == "tpub"
    assert derive_address(tpub, 0) == derive_address(xpub("m/44'/60'/0'"), 0)


@pytest.mark.parametrize("network", ["main", "test"])
def test_a_private_extended_key_is_refused_without_echoing_it(network: str) -> None:
    root = BIP32.from_seed(SEED, network=network)
    xprv: str = root.get_xpriv_from_path("m/44'/60'/0'")
    line = refusal(xprv)
    assert "PRIVATE key" in line and xprv[:12] not in line


def test_other_version_bytes_are_refused() -> None:
    ypub = reserialize(xpub("m/44'/60'/0'"), version=0x049D7CB2)  # BIP-49's ypub
    assert ypub.startswith("ypub")
    assert "has version bytes 0x049d7cb2, not those of an xpub" in refusal(ypub)


def test_a_public_key_off_the_curve_is_refused() -> None:
    off = reserialize(xpub("m/44'/60'/0'"), key_bytes=b"\x02" + b"\x00" * 31 + b"\x07")
    assert "not a point on secp256k1" in refusal(off)


@pytest.mark.parametrize(
    "text",
    [
        "xpub",
        "not base58 0OIl",
        "xpub" + "1" * 107,  # base58, but the checksum fails
        "Ä" * 111,
    ],
)
def test_text_that_is_no_extended_key_is_one_line(text: str) -> None:
    assert "base58check" in refusal(text) or "not 78" in refusal(text)


def test_a_bad_checksum_of_a_real_key_is_refused() -> None:
    key = xpub("m/44'/60'/0'")
    typo = key[:-1] + ("a" if key[-1] != "a" else "b")
    assert "valid checksum" in refusal(typo)


@pytest.mark.parametrize("role", ["api", "scanner", "worker"])
def test_every_role_refuses_the_change_level_key_at_start_up(role: str) -> None:
    """A real `payflow <role>` process exits 2 with the one line before it connects."""
    env = {
        **os.environ,
        "ETH_DEPOSIT_XPUB": xpub("m/44'/60'/1'/0"),
        "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
    }
    done = subprocess.run(
        [sys.executable, "-m", "payflow", role],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "payflow: setting ETH_DEPOSIT_XPUB is invalid: is a key at depth 4 (the change level"
        f" m/44'/60'/a'/0); {EXPECTED} (m/44'/60'/a', the xpub wallets export per account)"
    ]


@pytest.mark.parametrize("around", [(" ", ""), ("", "\n"), ("  ", "\t"), ("\t", "\r\n")])
def test_whitespace_around_the_key_is_the_same_key(around: tuple[str, str]) -> None:
    """A key pasted with a space or a line end around it is taken as the key itself
    (a leading space was refused as a bad checksum, a trailing tab kept in the setting)."""
    key = xpub("m/44'/60'/0'")
    settings = load_settings(eth_deposit_xpub=around[0] + key + around[1])
    assert settings.eth_deposit_xpub == key
    assert derive_address(settings.eth_deposit_xpub, 0) == derive_address(key, 0)


def test_an_account_key_with_parent_fingerprint_zero_derives_the_same_addresses() -> None:
    """BIP-32 refuses a zero fingerprint only at depth 0; at depth 3 it is what some tools
    export, and the fingerprint takes no part in deriving: the same addresses."""
    from bip32.base58 import b58decode_check

    key = xpub("m/44'/60'/0'")
    raw = bytearray(b58decode_check(key))
    raw[5:9] = bytes(4)
    zeroed = b58encode_check(bytes(raw)).decode()
    assert load_settings(eth_deposit_xpub=zeroed).eth_deposit_xpub == zeroed
    assert [derive_address(zeroed, i) for i in range(3)] == [
        derive_address(key, i) for i in range(3)
    ]
