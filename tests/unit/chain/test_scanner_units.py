"""Pure parts of the scanner and derivation: `payflow up` adds the scanner only with a
chain configured; the Transfer log decoding; the settings refuse a private key."""

from __future__ import annotations

import pytest

from payflow.chain.watch.blocks import _position, _units, address_topic
from payflow.config import SettingsError, load_settings
from payflow.roles import ROLES, UP_ROLES, up_roles


def test_up_runs_the_scanner_only_when_a_chain_is_configured() -> None:
    assert "scanner" in ROLES
    assert up_roles(load_settings()) == UP_ROLES
    with_chain = load_settings(eth_rpc_url="http://127.0.0.1:8545")
    assert up_roles(with_chain) == (*UP_ROLES, "scanner")


def test_transfer_log_parts() -> None:
    assert address_topic("0x" + "ab" * 20) == "0x" + "00" * 12 + "ab" * 20
    assert _units("0x" + "00" * 31 + "2a") == 42
    assert _units("0x") is None  # ERC-721 style: no amount word
    assert _units("0x" + "zz" * 32) is None
    receipt = {"logs": [{"logIndex": "0x7"}, {"logIndex": "0x8"}, {"logIndex": "0x9"}]}
    assert _position(receipt, 9) == 2


def test_settings_refuse_a_private_extended_key() -> None:
    xprv = (
        "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJ"
        "xWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi"
    )
    with pytest.raises(SettingsError) as refused:
        load_settings(eth_deposit_xpub=xprv)
    assert xprv not in str(refused.value)
