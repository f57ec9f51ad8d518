"""Derived deposit addresses equal the accounts the node itself derives from its
mnemonic (anvil's `eth_accounts`, m/44'/60'/0'/0/i)."""

from __future__ import annotations

from bip32 import BIP32  # type: ignore[import-untyped]
from eth_account.hdaccount import seed_from_mnemonic

from payflow.chain.watch.derivation import derive_address
from payflow_lab.anvil import DEFAULT_ACCOUNTS, DEFAULT_MNEMONIC, AnvilNode


async def test_derived_addresses_equal_the_nodes_accounts(anvil: AnvilNode) -> None:
    seed = seed_from_mnemonic(DEFAULT_MNEMONIC, "")
    xpub = BIP32.from_seed(seed).get_xpub_from_path("m/44'/60'/0'")  # watch-only
    node_accounts = await anvil.rpc.call("eth_accounts")
    derived = [derive_address(xpub, i).lower() for i in range(len(node_accounts))]
    assert derived == [a.lower() for a in node_accounts]
    assert tuple(derived) == DEFAULT_ACCOUNTS
