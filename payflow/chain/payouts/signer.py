"""The hot wallet: the private key, kept in this object only, and EIP-1559 signing.

The key comes from `ETH_HOT_WALLET_KEY` (local runs) or an encrypted keystore file
(`ETH_HOT_WALLET_KEYSTORE` + `ETH_HOT_WALLET_KEYSTORE_PASSWORD`). It never reaches a log,
an error message, the database or a repr: errors name the setting, never the value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_abi.abi import encode as abi_encode
from eth_account import Account
from eth_utils.abi import function_signature_to_4byte_selector
from eth_utils.address import to_checksum_address
from pydantic import SecretStr

from payflow.config import PayoutSettings
from payflow.errors import PayflowError

TRANSFER_SELECTOR = function_signature_to_4byte_selector("transfer(address,uint256)")
BALANCE_OF_SELECTOR = function_signature_to_4byte_selector("balanceOf(address)")


class HotWalletKeyInvalid(PayflowError):
    """The configured key or keystore cannot be used (the message names the setting only)."""


@dataclass(frozen=True, slots=True)
class SignedTx:
    """A signed transaction: its raw bytes (0x hex) and hash (0x hex, lower case)."""

    raw: str
    tx_hash: str


@dataclass(frozen=True, slots=True)
class TxFees:
    """EIP-1559 fees of one attempt, in wei; `gas_limit` in gas units."""

    gas_limit: int
    max_fee_per_gas: int
    max_priority_fee_per_gas: int


def transfer_calldata(to_address: str, units: int) -> str:
    """ERC-20 `transfer(to, units)` calldata (0x hex)."""
    return (
        "0x" + (TRANSFER_SELECTOR + abi_encode(["address", "uint256"], [to_address, units])).hex()
    )


def balance_of_calldata(holder: str) -> str:
    """ERC-20 `balanceOf(holder)` calldata (0x hex)."""
    return "0x" + (BALANCE_OF_SELECTOR + abi_encode(["address"], [holder])).hex()


class HotWallet:
    """One hot-wallet key. `address` is lower case; the key is reachable only by `sign`."""

    __slots__ = ("_account", "address")

    def __init__(self, key: SecretStr) -> None:
        try:
            account = Account.from_key(key.get_secret_value().strip())
        except Exception:  # any parse error: never echo the key or the library's message
            raise HotWalletKeyInvalid("ETH_HOT_WALLET_KEY is not a valid private key") from None
        self._account = account
        self.address: str = account.address.lower()

    def __repr__(self) -> str:
        return f"HotWallet({self.address})"

    __str__ = __repr__

    def __reduce__(self) -> Any:  # never pickled: a copy of the key would leave the process
        raise TypeError("HotWallet cannot be pickled")

    @classmethod
    def from_keystore(cls, path: str, password: SecretStr) -> HotWallet:
        """Decrypt a JSON keystore file (web3 secret storage)."""
        try:
            keystore = json.loads(Path(path).read_text(encoding="utf-8"))
            key = Account.decrypt(keystore, password.get_secret_value())
        except Exception:
            raise HotWalletKeyInvalid(
                "ETH_HOT_WALLET_KEYSTORE cannot be decrypted with ETH_HOT_WALLET_KEYSTORE_PASSWORD"
            ) from None
        return cls(SecretStr(key.hex()))

    def sign(
        self,
        *,
        chain_id: int,
        nonce: int,
        to: str,
        value: int,
        data: str,
        fees: TxFees,
    ) -> SignedTx:
        """Sign an EIP-1559 (type 2) transaction; deterministic for the same fields."""
        tx = {
            "type": 2,
            "chainId": chain_id,
            "nonce": nonce,
            "to": to_checksum_address(to),
            "value": value,
            "data": data,
            "gas": fees.gas_limit,
            "maxFeePerGas": fees.max_fee_per_gas,
            "maxPriorityFeePerGas": fees.max_priority_fee_per_gas,
        }
        signed = self._account.sign_transaction(tx)
        raw = "0x" + bytes(signed.raw_transaction).hex()
        return SignedTx(raw=raw, tx_hash="0x" + bytes(signed.hash).hex())


def wallets_from_settings(settings: PayoutSettings) -> list[HotWallet]:
    """The configured hot wallet(s): the keystore if set, else `ETH_HOT_WALLET_KEY`."""
    if settings.eth_hot_wallet_keystore:
        if settings.eth_hot_wallet_keystore_password is None:
            raise HotWalletKeyInvalid(
                "ETH_HOT_WALLET_KEYSTORE is set without ETH_HOT_WALLET_KEYSTORE_PASSWORD"
            )
        return [
            HotWallet.from_keystore(
                settings.eth_hot_wallet_keystore, settings.eth_hot_wallet_keystore_password
            )
        ]
    if settings.eth_hot_wallet_key is not None:
        return [HotWallet(settings.eth_hot_wallet_key)]
    return []
