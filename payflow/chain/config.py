"""Chain configuration as data: a name, an RPC URL and a confirmation policy per chain.

`ETH_MAINNET` comes from `ETH_RPC_URL` / `ETH_CONFIRMATION_POLICY` / `ETH_CHAIN_ID`; any
other EVM chain is configuration only,
`EVM_CHAINS` = `{"NAME": {"rpc_url": "...", "policy": "...", "chain_id": N}}`
(its token registry is data too: `payflow tokens add-chain`, `payflow tokens add`).

A policy is `finalized` (the node's `finalized` block tag: Ethereum L1's default) or
`confirmations:N` (final when at least N blocks sit on top of it: head - N). `safe` is
deliberately not offered (docs/chain.md, "Policies").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from payflow.config import Settings, SettingsError, check_service_url

ETH_MAINNET = "ETH_MAINNET"
CHAIN_NAME = re.compile(r"^[A-Z0-9_]{2,40}$")
POLICY = re.compile(r"^(finalized|confirmations:([0-9]{1,5}))$")


class PolicyKind(StrEnum):
    FINALIZED = "finalized"
    CONFIRMATIONS = "confirmations"


@dataclass(frozen=True, slots=True)
class Policy:
    """When a block is final: `finalized` tag, or `confirmations` N blocks behind head."""

    kind: PolicyKind
    confirmations: int = 0

    @classmethod
    def parse(cls, text: str) -> Policy:
        """`finalized` or `confirmations:N` (N >= 1); ValueError otherwise."""
        match = POLICY.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"confirmation policy {text!r}: use finalized or confirmations:N")
        if match.group(2) is None:
            return cls(PolicyKind.FINALIZED)
        count = int(match.group(2))
        if count < 1:
            raise ValueError("confirmations:N needs N >= 1")
        return cls(PolicyKind.CONFIRMATIONS, count)

    def __str__(self) -> str:
        if self.kind is PolicyKind.FINALIZED:
            return "finalized"
        return f"confirmations:{self.confirmations}"


@dataclass(frozen=True, slots=True)
class ChainConfig:
    """One EVM chain payflow watches: its registry name, node URL, finality policy and the
    EIP-155 chain id its node must answer (`payflow.chain.identity` checks it)."""

    name: str
    rpc_url: str
    policy: Policy
    chain_id: int = 1  # the EIP-155 id the node must answer to eth_chainId


def _chain_id(name: str, value: str | int | None) -> int:
    """`EVM_CHAINS.<name>.chain_id` as a positive int; `SettingsError` otherwise."""
    text = str(value if value is not None else "").strip()
    if not text.isdigit() or int(text) <= 0:
        raise SettingsError(
            f"setting EVM_CHAINS is invalid: {name}.chain_id must be the chain's EIP-155 id"
            f" (a positive integer), got {value!r}"
        )
    return int(text)


def chain_configs(settings: Settings) -> dict[str, ChainConfig]:
    """Every configured chain by name; empty when no RPC URL is set (chain features off).

    Raises `SettingsError` (one line naming the setting) on a malformed entry.
    """
    configs: dict[str, ChainConfig] = {}
    if settings.eth_rpc_url:
        try:
            policy = Policy.parse(settings.eth_confirmation_policy)
        except ValueError as error:
            raise SettingsError(f"setting ETH_CONFIRMATION_POLICY is invalid: {error}") from None
        configs[ETH_MAINNET] = ChainConfig(
            ETH_MAINNET, settings.eth_rpc_url, policy, settings.eth_chain_id
        )
    for name, entry in settings.evm_chains.items():
        if not CHAIN_NAME.fullmatch(name) or name in configs:
            raise SettingsError(f"setting EVM_CHAINS is invalid: chain name {name!r}")
        url = str(entry.get("rpc_url", ""))
        try:
            check_service_url(url, ("http", "https"))
        except ValueError as error:
            raise SettingsError(f"setting EVM_CHAINS is invalid: {name}.rpc_url {error}") from None
        try:
            policy = Policy.parse(str(entry.get("policy", "finalized")))
        except ValueError as error:
            raise SettingsError(f"setting EVM_CHAINS is invalid: {name}.policy: {error}") from None
        configs[name] = ChainConfig(name, url, policy, _chain_id(name, entry.get("chain_id")))
    return configs
