"""Custody against the chain, by balances, on a real anvil: ETH pushed by a self-destruct,
a reversed deposit final on chain again, and a token payout booked as paid whose tokens
never left the hot wallet each show as a mismatch; a treasury funding is booked once."""

from __future__ import annotations

import uuid
from decimal import Decimal

import asyncpg
import pytest
from redis.asyncio import Redis

from payflow.chain.custody import CustodyLine, CustodyReport, reconcile_custody
from payflow.chain.deposits import SQL
from payflow.chain.finality import FinalityOracle
from payflow.chain.recon_cli import run_chain_recon
from payflow.chain.rpc import RpcError, to_hex
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import record_and_announce
from payflow.ledger.posting import post_event
from payflow.ledger.records import EventType
from payflow_lab.anvil import DEFAULT_ACCOUNTS, WEI_PER_ETH, AnvilNode

from .deposit_support import (
    CHAIN,
    chain_settings,
    deliver,
    generic_event,
    new_address,
    open_account,
    oracle,
    redis,
    register_token,
    run,
    settings,
)

__all__ = ["oracle", "redis", "settings"]  # fixtures


def _line(report: CustodyReport, asset: str) -> CustodyLine:
    [line] = [line for line in report.lines if line.asset == asset]
    return line


async def test_eth_pushed_by_a_self_destruct_is_a_mismatch(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    settings: Settings,
    oracle: FinalityOracle,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _account, address = await open_account(pool, settings, "ETH")
    await anvil.mine(3)
    before = await reconcile_custody(pool, settings, oracle, CHAIN)
    assert before.clean, [line.summary() for line in before.lines]
    # init code: PUSH20 <deposit address> SELFDESTRUCT, created with 1.5 ETH
    code = "0x73" + address[2:] + "ff"
    tx = await anvil.send(
        {
            "from": DEFAULT_ACCOUNTS[0],
            "data": code,
            "value": to_hex(3 * WEI_PER_ETH // 2),
            "gas": to_hex(100_000),
        }
    )
    assert (await anvil.receipt(tx))["status"] == "0x1"
    await anvil.mine(3)
    report = await reconcile_custody(pool, settings, oracle, CHAIN)
    eth = _line(report, "ETH")
    assert (eth.books, eth.on_chain, eth.in_flight) == (0, Decimal("1.5"), 0)
    assert eth.difference == Decimal("1.5") and not report.clean
    assert "MISMATCH" in eth.summary()
    assert any("no known transfer" in why for why in eth.explanations)
    capsys.readouterr()
    assert (
        await run_chain_recon(settings, from_block=None, database=settings, redis_settings=settings)
        is False
    )  # `payflow recon --chain` exits 1
    out = capsys.readouterr().out
    assert (
        "custody custody:ETH_MAINNET:ETH books=0 chain=1.5 in_flight=0 difference=1.5"
        " result=MISMATCH"
    ) in out


async def test_a_reversed_deposit_final_on_chain_again_is_a_mismatch_until_credited(
    anvil: AnvilNode, pool: asyncpg.Pool, database_url: str, migration_url: str, redis: Redis
) -> None:
    settings = chain_settings(
        database_url, migration_url, anvil.url, eth_confirmation_policy="confirmations:1"
    )
    account, address = await open_account(pool, settings, "ETH")
    await anvil.mine(2)
    tx = await anvil.send_eth(address, WEI_PER_ETH)
    raw = await anvil.rpc.call("eth_getRawTransactionByHash", tx)
    await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
    oracle = FinalityOracle(settings, redis, redis_settings=settings)
    try:
        await run(pool, settings, oracle)
        await anvil.mine(1)
        assert (await run(pool, settings, oracle)).credited == 1
        await anvil.reorg(3)  # deeper than N = 1: the credit is reversed
        assert (await run(pool, settings, oracle)).reversed == 1
        try:
            await anvil.rpc.send_raw_transaction(raw)  # the same signed transaction
        except RpcError:
            pass  # the node put it back in its pool itself
        await anvil.mine(3)
        assert (await anvil.receipt(tx))["status"] == "0x1"
        report = await reconcile_custody(pool, settings, oracle, CHAIN)
        eth = _line(report, "ETH")
        assert (eth.books, eth.on_chain, eth.difference) == (0, Decimal(1), Decimal(1))
        tid = f"{CHAIN}:{tx}:-1"
        assert f"deposit reversed by a reorg, final on chain again: {tid} (1)" in (eth.explanations)
        # the lifecycle re-checks the reversed deposit, sees it re-included and credits it
        # again (`chain:<id>~1`): the mismatch lasted until then
        for _ in range(3):
            await run(pool, settings, oracle)
        credits = await pool.fetch(
            "SELECT source_event_id FROM balance_events WHERE account_id = $1 ORDER BY id",
            account,
        )
        assert [r["source_event_id"] for r in credits] == [
            f"chain:{tid}",
            f"reorg:{tid}",
            f"chain:{tid}~1",
        ]
        healed = await reconcile_custody(pool, settings, oracle, CHAIN)
    finally:
        await oracle.aclose()
    assert _line(healed, "ETH").clean, _line(healed, "ETH").summary()


async def test_a_token_payout_booked_paid_whose_tokens_never_left_is_a_mismatch(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    oracle: FinalityOracle,
) -> None:
    token = await anvil.deploy_quirk_token(symbol="USDC", decimals=6)
    await register_token(owner_pool, token)
    account, address = await open_account(pool, settings, "USDC")
    hot, vault = DEFAULT_ACCOUNTS[1].lower(), DEFAULT_ACCOUNTS[2].lower()
    await owner_pool.execute(
        "INSERT INTO hot_wallets (chain, address, next_nonce) VALUES ($1, $2, 0)", CHAIN, hot
    )
    await pool.execute(SQL["treasury_add"], CHAIN, vault, "ops@test")
    await anvil.token_mint(token, DEFAULT_ACCOUNTS[0], 10_000_000)
    deposit = await anvil.token_transfer(token, address, 10_000_000)
    await deliver(pool, settings, generic_event(address, "10", deposit, "USDC", token))
    await anvil.token_mint(token, vault, 4_000_000)
    await anvil.token_transfer(token, hot, 4_000_000, sender=DEFAULT_ACCOUNTS[2])  # funding
    await anvil.mine(3)
    await run(pool, settings, oracle)
    await run(pool, settings, oracle)
    first = await reconcile_custody(pool, settings, oracle, CHAIN, from_block=0)
    assert len(first.booked_movements) == 1 and first.booked_movements[0].startswith(
        "treasury_funding 0x"
    )
    usdc = _line(first, "USDC")
    assert (usdc.books, usdc.on_chain, usdc.difference) == (Decimal(14), Decimal(14), 0)
    again = await reconcile_custody(pool, settings, oracle, CHAIN, from_block=0)
    assert again.booked_movements == [] and _line(again, "USDC").books == 14  # once

    # the payout's transfer returns false for a blocked recipient: no tokens move
    recipient = new_address()
    await anvil.token_set_blocked(token, recipient, True)
    payout_tx = await anvil.token_transfer(token, recipient, 4_000_000, sender=hot)
    await anvil.mine(3)
    payout_id = uuid.uuid4()
    await owner_pool.execute(
        "INSERT INTO payouts (id, merchant_id, idempotency_key, account_id, asset, chain,"
        " to_address, contract, decimals, amount, fee_hold, status, hot_wallet, nonce,"
        " landed_tx_hash, receipt_status, finalized_at)"
        " VALUES ($1, $2, 'k', $3, 'USDC', $4, $5, $6, 6, 4, 0, 'confirmed', $7, 0, $8, 1,"
        " now())",
        payout_id,
        uuid.uuid4(),
        account,
        CHAIN,
        recipient,
        token,
        hot,
        payout_tx,
    )
    await owner_pool.execute(
        "INSERT INTO payout_txs (payout_id, attempt, chain, hot_wallet, nonce, tx_hash, raw_tx,"
        " gas_limit, max_fee_per_gas, max_priority_fee_per_gas)"
        " VALUES ($1, 1, $2, $3, 0, $4, '0x', 100000, 1, 1)",
        payout_id,
        CHAIN,
        hot,
        payout_tx,
    )
    async with pool.acquire() as conn, transaction(conn, settings):
        await record_and_announce(
            conn,
            event_id=f"po:{payout_id}",
            account_id=account,
            amount="4",
            event_type=EventType.WITHDRAWAL,
            scale=6,
            trace_id="payout",
        )
    await post_event(pool, settings, f"po:{payout_id}")
    report = await reconcile_custody(pool, settings, oracle, CHAIN, from_block=0)
    usdc = _line(report, "USDC")
    assert (usdc.books, usdc.on_chain, usdc.difference) == (Decimal(10), Decimal(14), Decimal(4))
    assert any(str(payout_id) in why and "never left" in why for why in usdc.explanations)
    assert not report.clean
