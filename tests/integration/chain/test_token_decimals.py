"""`payflow tokens add` asks the node: with an RPC for the chain, a contract registers only
with the decimals its own `decimals()` answers (an 18-decimal token registered as USDC
with 6 would credit a deposit of 0.0001 token as 100,000,000 USDC)."""

# ruff: noqa: F811 - the fixtures imported from deposit_support are parameters here
from __future__ import annotations

import asyncpg
import pytest

from payflow.config import Settings
from payflow.errors import BadInput
from payflow.ingress.registry import add_token_cli
from payflow_lab.anvil import DEFAULT_ACCOUNTS, AnvilNode

from .deposit_support import CHAIN, settings  # noqa: F401 (fixtures)


async def _registered(settings: Settings, contract: str) -> list[tuple[str, int]]:
    conn = await asyncpg.connect(settings.migration_url())
    try:
        rows = await conn.fetch(
            "SELECT asset, decimals FROM chain_tokens WHERE contract = $1", contract.lower()
        )
    finally:
        await conn.close()
    return [(r["asset"], r["decimals"]) for r in rows]


async def test_a_token_registers_only_with_its_on_chain_decimals(
    anvil: AnvilNode, settings: Settings
) -> None:
    token = await anvil.deploy_token("Eighteen", "EGT", 18)
    with pytest.raises(BadInput, match="has 18 decimals on chain, not 6"):
        await add_token_cli(settings, CHAIN, token, "USDC", 6, database=settings)
    assert await _registered(settings, token) == []
    # An address with no contract (an account) answers no decimals() at all.
    with pytest.raises(BadInput, match="has no ERC-20 decimals"):
        await add_token_cli(settings, CHAIN, DEFAULT_ACCOUNTS[7], "USDC", 6, database=settings)
    assert await _registered(settings, DEFAULT_ACCOUNTS[7]) == []
    six = await anvil.deploy_token("Six", "SIX", 6)
    row = await add_token_cli(settings, CHAIN, six, "USDC", 6, database=settings)
    assert (row.asset, row.decimals, row.created) == ("USDC", 6, True)
    assert await _registered(settings, six) == [("USDC", 6)]
