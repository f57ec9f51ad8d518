"""Chain configuration as data: a name, an RPC URL and a confirmation policy per chain.

The parsing lives with the chain's settings slice (`payflow.config.chain`), which checks
it when the settings load; this module names it for the chain package.
"""

from __future__ import annotations

from payflow.config.chain import (
    CHAIN_NAME,
    ETH_MAINNET,
    POLICY,
    ChainConfig,
    ChainSettings,
    Policy,
    PolicyKind,
    chain_configs,
)

__all__ = [
    "CHAIN_NAME",
    "ETH_MAINNET",
    "POLICY",
    "ChainConfig",
    "ChainSettings",
    "Policy",
    "PolicyKind",
    "chain_configs",
]
