"""On a real node, the same transfer reported by a generic webhook,
an Alchemy activity and the scanner is one deposit and ONE credit (native value and an
ERC-20 transfer alike)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from payflow.alerts import LogAlertSink
from payflow.chain.finality import FinalityOracle
from payflow.chain.lifecycle import process_deposits
from payflow.chain.transfers import transfer_id
from payflow.chain.watch.scanner import Scanner
from payflow.config import Settings
from payflow_lab.anvil import AnvilNode

from .alchemy import eth_activity, token_activity, webhook
from .ingress_support import ETH_ADDRESS, USDC_ADDRESS, balance, deliver, generic, rows
from .ingress_support import eth_account as eth_account  # fixtures
from .ingress_support import usdc_account as usdc_account

CHAIN = "ETH_MAINNET"


@pytest.fixture
async def node(tmp_path: Any) -> AsyncIterator[AnvilNode]:
    anvil = AnvilNode(log_path=str(tmp_path / "anvil.log")).start()
    try:
        yield anvil
    finally:
        await anvil.aclose()


async def test_webhook_alchemy_and_scanner_give_one_credit(
    app: FastAPI,
    anon: httpx.AsyncClient,
    api_settings: Settings,
    node: AnvilNode,
    eth_account: str,
    usdc_account: str,
) -> None:
    token = await node.deploy_token("Test USD Coin", "USDC", 6)
    owner = await asyncpg.connect(api_settings.migration_url())
    try:
        await owner.execute(
            "INSERT INTO chain_tokens (chain, contract, asset, decimals)"
            " VALUES ($1, $2, 'USDC', 6)",
            CHAIN,
            token,
        )
    finally:
        await owner.close()
    await node.token_mint(token, (await node.rpc.call("eth_accounts"))[0], 100_000_000)
    native_tx = await node.send_eth(ETH_ADDRESS, 2 * 10**18)
    token_tx = await node.token_transfer(token, USDC_ADDRESS, 12_500_000)
    log_index = int((await node.receipt(token_tx))["logs"][0]["logIndex"], 16)

    # The providers' reports: a generic webhook and an Alchemy activity for each.
    await deliver(
        anon,
        generic(
            event_id="evt-eth",
            to_address=ETH_ADDRESS,
            asset="ETH",
            amount="2",
            tx_hash=native_tx,
            contract_address=None,
        ),
    )
    await deliver(anon, generic(event_id="evt-usdc", tx_hash=token_tx, contract_address=token))
    await deliver(
        anon,
        webhook(
            eth_activity(ETH_ADDRESS, 2 * 10**18, tx_hash=native_tx),
            token_activity(
                USDC_ADDRESS, 12_500_000, tx_hash=token_tx, log_index=log_index, contract=token
            ),
        ),
    )
    settings = api_settings.model_copy(
        update={
            "eth_rpc_url": node.url,
            "eth_scanner_lag_blocks": 0,
            "eth_scanner_start_block": 0,
            "chain_recheck_s": 0.001,
        }
    )
    pool = app.state.api.pool
    oracle = FinalityOracle(settings, None, redis_settings=settings)
    try:
        await Scanner(pool, settings, oracle, database=settings).catch_up(CHAIN)
        await node.mine(3)  # final: finalized is head - 2
        credited = 0
        for _ in range(5):
            credited += (
                await process_deposits(pool, settings, oracle, LogAlertSink(), database=settings)
            ).credited
        await Scanner(pool, settings, oracle, database=settings).catch_up(
            CHAIN
        )  # scanning again changes nothing
        credited += (
            await process_deposits(pool, settings, oracle, LogAlertSink(), database=settings)
        ).credited
    finally:
        await oracle.aclose()

    assert credited == 2
    assert await balance(app, eth_account) == Decimal(2)
    assert await balance(app, usdc_account) == Decimal("12.5")
    deposits = await rows(
        app, "SELECT transfer_id, status, sources FROM chain_deposits ORDER BY transfer_id"
    )
    assert [(d["transfer_id"], d["status"], sorted(d["sources"])) for d in deposits] == sorted(
        [
            (transfer_id(CHAIN, native_tx, -1), "credited", ["alchemy", "scanner", "webhook"]),
            (transfer_id(CHAIN, token_tx, 0), "credited", ["alchemy", "scanner", "webhook"]),
        ]
    )
    reports = await rows(
        app, "SELECT source, status, transfer_id FROM chain_deposit_reports ORDER BY source"
    )
    assert len(reports) == 6 and {r["status"] for r in reports} == {"confirmed"}
    entries = await rows(
        app,
        "SELECT account_id, count(*) AS n FROM balance_events GROUP BY account_id",
    )
    assert sorted(e["n"] for e in entries) == [1, 1]
