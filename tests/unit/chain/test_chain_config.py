"""Chain configuration as data: policies and more EVM chains by settings only."""

from __future__ import annotations

import pytest

from payflow.chain.config import ChainConfig, Policy, PolicyKind, chain_configs
from payflow.config import SettingsError, load_settings


def test_policies_parse_and_render() -> None:
    assert Policy.parse("finalized") == Policy(PolicyKind.FINALIZED)
    assert Policy.parse("confirmations:12") == Policy(PolicyKind.CONFIRMATIONS, 12)
    assert str(Policy.parse("confirmations:12")) == "confirmations:12"
    for bad in ("safe", "latest", "confirmations:0", "confirmations:-1", "confirmations:x"):
        with pytest.raises(ValueError):
            Policy.parse(bad)


def test_no_rpc_means_no_chain_and_more_chains_are_configuration() -> None:
    assert chain_configs(load_settings()) == {}
    settings = load_settings(
        eth_rpc_url="http://127.0.0.1:8545",
        evm_chains={
            "BASE_MAINNET": {
                "rpc_url": "https://base.example",
                "policy": "confirmations:20",
                "chain_id": 8453,
            }
        },
    )
    assert chain_configs(settings) == {
        "ETH_MAINNET": ChainConfig(
            "ETH_MAINNET", "http://127.0.0.1:8545", Policy(PolicyKind.FINALIZED)
        ),
        "BASE_MAINNET": ChainConfig(
            "BASE_MAINNET", "https://base.example", Policy(PolicyKind.CONFIRMATIONS, 20), 8453
        ),
    }


@pytest.mark.parametrize(
    "chains",
    [
        {"lower": {"rpc_url": "http://x"}},
        {"OTHER": {"rpc_url": "ftp://x"}},
        {"OTHER": {"rpc_url": "http://x", "policy": "safe", "chain_id": 5}},
        {"OTHER": {"rpc_url": "http://x"}},  # no chain id: which network is it?
        {"OTHER": {"rpc_url": "http://x", "chain_id": "0"}},
        {"OTHER": {"rpc_url": "http://x", "chain_id": "polygon"}},
    ],
)
def test_a_malformed_chain_entry_names_the_setting(
    chains: dict[str, dict[str, str | int]],
) -> None:
    with pytest.raises(SettingsError, match="EVM_CHAINS"):
        chain_configs(load_settings(evm_chains=chains))


def test_safe_is_not_a_policy_setting() -> None:
    with pytest.raises(SettingsError, match="ETH_CONFIRMATION_POLICY"):
        load_settings(eth_confirmation_policy="safe")
