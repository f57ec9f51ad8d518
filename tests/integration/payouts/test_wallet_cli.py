"""`payflow wallet status` names a PAYOUT_CHAIN that is not in the registry instead of
printing an empty, healthy-looking report."""

from __future__ import annotations

import pytest

from payflow.chain.payouts.wallet import wallet_status_cli
from payflow.config import Settings
from payflow.errors import BadInput


async def test_an_unknown_payout_chain_is_named(settings: Settings) -> None:
    typo = settings.model_copy(update={"payout_chain": "NOPE"})
    with pytest.raises(BadInput, match="'NOPE' is not a registered chain"):
        await wallet_status_cli(typo, chains=typo, database=typo)


async def test_the_registered_chain_reports_without_a_node(settings: Settings) -> None:
    no_rpc = settings.model_copy(update={"eth_rpc_url": None})
    report = await wallet_status_cli(no_rpc, chains=no_rpc, database=no_rpc)
    assert report["chain"] == settings.payout_chain == "ETH_MAINNET"
    assert report["stuck"] == [] and report["waiting"] == []
