"""Crash points (real SIGKILLed processes), a reorg that drops the payout transaction,
a stuck transaction replaced by a fee bump, and a hot wallet too poor to pay."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from decimal import Decimal

import asyncpg
import pytest

from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.wallet import wallet_status
from payflow.config import Settings
from payflow_lab.anvil import AnvilNode
from tests.integration.payouts.conftest import (
    WEI,
    fresh_address,
    funded_account,
    ledger_rows,
    request_payout,
    settle_all,
)
from tests.recording_alerts import RecordingSink


async def _nonce(anvil: AnvilNode, address: str) -> int:
    return int(await anvil.rpc.call("eth_getTransactionCount", address, "latest"), 16)


async def _one_debit(pool: asyncpg.Pool, account: object, amount: Decimal) -> None:
    rows = await ledger_rows(pool, account)  # type: ignore[arg-type]
    assert [r["event_type"] for r in rows] == ["withdrawal", "withdrawal_fee"]
    assert rows[0]["amount"] == -amount
    assert await pool.fetchval("SELECT held FROM accounts WHERE id = $1", account) == 0


@pytest.mark.parametrize("point", ["after_sign", "after_broadcast"])
async def test_a_crash_ends_in_one_transaction_and_one_debit(
    point: str,
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    hot_key: str,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    to = fresh_address()
    payout = await request_payout(pool, payout_settings, account, "1.5", to)
    env = {
        **os.environ,
        "DATABASE_URL": payout_settings.database_url,
        "PAYOUT_CHAIN": payout_settings.payout_chain,
        "EVM_CHAINS": json.dumps(payout_settings.evm_chains),
        "ETH_HOT_WALLET_KEY": hot_key,
        "LOG_LEVEL": "WARNING",
    }
    crasher = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.payouts.crasher",
        point,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(crasher.communicate(), timeout=60)
    assert crasher.returncode == -9, stderr.decode()[-2000:]
    row = await pool.fetchrow("SELECT status FROM payouts WHERE id = $1", payout["id"])
    assert row["status"] == "signed"  # the raw tx is stored; the send is not recorded
    stored = await pool.fetchval(
        "SELECT tx_hash FROM payout_txs WHERE payout_id = $1", payout["id"]
    )
    on_chain = await anvil.rpc.get_receipt(stored)
    assert (on_chain is not None) == (point == "after_broadcast")

    await settle_all(engine, anvil)

    done = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    assert (done["status"], done["landed_tx_hash"]) == ("confirmed", stored)
    assert await anvil.rpc.get_balance(to) == 3 * WEI // 2
    assert await _nonce(anvil, hot) == 1
    await _one_debit(pool, account, Decimal("1.5"))


async def test_reorg_drop_rebroadcasts_the_same_hash_and_posts_once(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    to = fresh_address()
    payout = await request_payout(pool, payout_settings, account, "2", to)
    await engine.tick()  # signed, sent, mined (automine) but not final
    first = await anvil.rpc.get_receipt(
        await pool.fetchval("SELECT tx_hash FROM payout_txs WHERE payout_id = $1", payout["id"])
    )
    assert first is not None
    await engine.tick()  # records the landed block
    await anvil.reorg(1)  # the block with the payout is replaced by an empty one
    landed = await anvil.rpc.get_receipt(first["transactionHash"])
    assert landed is None or landed["blockHash"] != first["blockHash"]

    await settle_all(engine, anvil)

    done = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    assert done["status"] == "confirmed"
    assert done["landed_tx_hash"] == first["transactionHash"]
    assert done["block_hash"] != first["blockHash"]
    assert await pool.fetchval("SELECT count(*) FROM payout_txs") == 1
    assert await anvil.rpc.get_balance(to) == 2 * WEI
    await _one_debit(pool, account, Decimal("2"))


async def test_stuck_transaction_is_replaced_with_the_same_nonce(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    await anvil.set_automine(False)
    low_fee = payout_settings.model_copy(update={"payout_priority_fee_wei": 1})
    engine.settings = low_fee
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    to = fresh_address()
    payout = await request_payout(pool, payout_settings, account, "1", to)
    await engine.tick()  # attempt 1 in the mempool, never mined
    engine.settings = low_fee.model_copy(update={"payout_stuck_after_s": 0.0})
    await engine.tick()  # stuck: attempt 2, same nonce, higher fees
    txs = await pool.fetch(
        "SELECT * FROM payout_txs WHERE payout_id = $1 ORDER BY attempt", payout["id"]
    )
    assert len(txs) == 2 and txs[0]["nonce"] == txs[1]["nonce"] == 0
    assert txs[1]["max_fee_per_gas"] > txs[0]["max_fee_per_gas"]
    assert txs[1]["max_priority_fee_per_gas"] > txs[0]["max_priority_fee_per_gas"]
    await anvil.mine(1)
    engine.settings = payout_settings  # no more bumps
    await settle_all(engine, anvil)

    done = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    assert done["status"] == "confirmed"
    assert done["landed_tx_hash"] in {t["tx_hash"] for t in txs}
    assert await anvil.rpc.get_balance(to) == WEI
    assert await _nonce(anvil, hot) == 1
    await _one_debit(pool, account, Decimal("1"))


async def test_a_poor_hot_wallet_makes_the_payout_wait_then_complete(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, WEI // 2)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    to = fresh_address()
    payout = await request_payout(pool, payout_settings, account, "1", to)
    for _ in range(2):
        await engine.tick()
        await anvil.mine(3)
    row = await pool.fetchrow("SELECT status, wait_reason FROM payouts WHERE id = $1", payout["id"])
    assert row["status"] == "held" and row["wait_reason"] == "hot wallet balance too low"
    assert isinstance(engine.alerts, RecordingSink)
    assert "payouts.hot_wallet_low" in engine.alerts.keys()
    assert await _nonce(anvil, hot) == 0 and await anvil.rpc.get_balance(to) == 0
    status = await wallet_status(pool, engine.settings, engine.rpc, [hot])
    assert [w["address"] for w in status["wallets"]] == [hot]
    assert status["wallets"][0]["balance"] == "0.5"
    assert [w["payout_id"] for w in status["waiting"]] == [str(payout["id"])]

    await anvil.set_balance(hot, 5 * WEI)
    await settle_all(engine, anvil)

    done = await pool.fetchrow(
        "SELECT status, wait_reason FROM payouts WHERE id = $1", payout["id"]
    )
    assert (done["status"], done["wait_reason"]) == ("confirmed", None)
    assert await anvil.rpc.get_balance(to) == WEI
    await _one_debit(pool, account, Decimal("1"))


async def test_a_frozen_account_signs_nothing_new_but_a_sent_payout_still_posts(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    sent_to, held_to = fresh_address(), fresh_address()
    sent = await request_payout(pool, payout_settings, account, "1", sent_to)
    await engine.tick()  # signed, sent and mined, not final
    held = await request_payout(pool, payout_settings, account, "2", held_to)
    await owner_pool.execute("UPDATE accounts SET status = 'frozen' WHERE id = $1", account)

    await settle_all(engine, anvil, rounds=2)

    rows = {r["id"]: r for r in await pool.fetch("SELECT * FROM payouts")}
    assert rows[sent["id"]]["status"] == "confirmed"  # its money left before the freeze
    assert (rows[held["id"]]["status"], rows[held["id"]]["wait_reason"]) == (
        "held",
        "account frozen",
    )
    assert await anvil.rpc.get_balance(sent_to) == WEI
    assert await anvil.rpc.get_balance(held_to) == 0
    entries = await ledger_rows(pool, account)
    assert [r["event_type"] for r in entries] == ["withdrawal", "withdrawal_fee"]
    acct = await pool.fetchrow("SELECT held FROM accounts WHERE id = $1", account)
    assert acct["held"] == Decimal("2.0021")
