"""The hot-wallet key never shows: not in repr/str, not in errors, not in settings' repr,
and it cannot be pickled; the broadcast classifier maps node answers."""

from __future__ import annotations

import pickle

import pytest
from eth_account import Account
from pydantic import SecretStr

from payflow.chain.payouts.broadcast import Broadcast, classify_rpc_error
from payflow.chain.payouts.signer import HotWallet, HotWalletKeyInvalid, TxFees
from payflow.config import load_settings

KEY = "0x" + "4c" * 32


def test_the_key_never_appears_in_repr_str_or_settings() -> None:
    wallet = HotWallet(SecretStr(KEY))
    assert wallet.address == Account.from_key(KEY).address.lower()
    for text in (repr(wallet), str(wallet), f"{wallet}"):
        assert "4c4c" not in text and wallet.address in text
    settings = load_settings(eth_hot_wallet_key=KEY)
    assert "4c4c" not in repr(settings) and "4c4c" not in str(settings.model_dump())
    with pytest.raises(TypeError):
        pickle.dumps(wallet)


def test_an_invalid_key_error_names_the_setting_not_the_value() -> None:
    bad = "0x" + "zz" * 32
    with pytest.raises(HotWalletKeyInvalid) as caught:
        HotWallet(SecretStr(bad))
    assert "zz" not in str(caught.value) and "ETH_HOT_WALLET_KEY" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_signing_is_deterministic_and_the_hash_is_the_raw_txs() -> None:
    wallet = HotWallet(SecretStr(KEY))
    fees = TxFees(21_000, 2 * 10**9, 10**9)
    one = wallet.sign(chain_id=31337, nonce=3, to="0x" + "ab" * 20, value=5, data="0x", fees=fees)
    two = wallet.sign(chain_id=31337, nonce=3, to="0x" + "ab" * 20, value=5, data="0x", fees=fees)
    assert one == two
    decoded = Account.recover_transaction(one.raw)
    assert decoded.lower() == wallet.address


@pytest.mark.parametrize(
    ("message", "outcome"),
    [
        ("already known", Broadcast.ACCEPTED),
        ("transaction already imported", Broadcast.ACCEPTED),
        ("nonce too low: next nonce 4, tx nonce 3", Broadcast.NONCE_USED),
        ("insufficient funds for gas * price + value", Broadcast.NO_FUNDS),
        ("replacement transaction underpriced", Broadcast.UNDERPRICED),
        ("execution reverted", Broadcast.REJECTED),
    ],
)
def test_node_answers_are_classified(message: str, outcome: Broadcast) -> None:
    assert classify_rpc_error(message) is outcome
