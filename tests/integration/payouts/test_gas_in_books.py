"""The gas payflow paid is in the books: every mined payout transaction (confirmed or
reverted, native or token) posts network_fees -> custody in the chain's native asset,
once, and the custody account moves exactly as the hot wallet's balance on anvil."""

from __future__ import annotations

from decimal import Decimal

import asyncpg

from payflow.chain.payouts.engine import PayoutEngine
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.moves import post_network_fee
from payflow_lab.anvil import AnvilNode
from tests.integration.ledger.books import assert_books_balance
from tests.integration.ledger.books import system_balance as _system_balance
from tests.integration.payouts.conftest import (
    CHAIN,
    WEI,
    fresh_address,
    funded_account,
    request_payout,
    settle_all,
)

CUSTODY_ETH = f"custody:{CHAIN}:ETH"
GAS = f"network_fees:{CHAIN}:ETH"


async def system_balance(pool: asyncpg.Pool, code: str) -> Decimal:
    """0 for an account no posting created yet (the ANVIL chain is registered by the test)."""
    return await _system_balance(pool, code) or Decimal(0)


async def _eth(anvil: AnvilNode, address: str) -> int:
    return int(await anvil.rpc.call("eth_getBalance", address, "latest"), 16)


async def _gas_transfers(pool: asyncpg.Pool) -> list[tuple[str, Decimal]]:
    rows = await pool.fetch(
        "SELECT t.reference, l.amount FROM ledger_transfers t"
        " JOIN ledger_legs l ON l.transfer_id = t.id AND l.ledger_account = $1"
        " WHERE t.kind = 'network_fee' ORDER BY t.id",
        CUSTODY_ETH,
    )
    return [(r["reference"], r["amount"]) for r in rows]


async def test_a_native_payout_posts_its_gas_and_custody_follows_the_hot_wallet(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    custody_before = await system_balance(pool, CUSTODY_ETH)
    chain_before = await _eth(anvil, hot)
    payout = await request_payout(pool, payout_settings, account, "1.25", fresh_address())

    await settle_all(engine, anvil)

    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    assert row["status"] == "confirmed"
    spent = Decimal(chain_before - await _eth(anvil, hot)) / WEI  # amount + gas, on chain
    gas = spent - Decimal("1.25")
    assert gas > 0
    assert await _gas_transfers(pool) == [(f"{CHAIN}:{row['landed_tx_hash']}", gas)]
    assert await system_balance(pool, GAS) == gas
    assert await system_balance(pool, CUSTODY_ETH) == custody_before - spent
    # the customer paid the gas as its fee (native payout): fees and network_fees meet
    assert await system_balance(pool, "fees:ETH") == row["fee_paid"] == gas
    await assert_books_balance(pool)

    # once per mined transaction: posting the same hash again posts nothing
    async with pool.acquire() as conn, transaction(conn, payout_settings):
        assert await post_network_fee(conn, CHAIN, row["landed_tx_hash"], 10**15) == 0
    assert len(await _gas_transfers(pool)) == 1


async def test_a_token_payout_posts_its_gas_in_eth(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    token = await anvil.deploy_token("Test USD Coin", "USDC", 6)
    await owner_pool.execute(
        "INSERT INTO chain_tokens (chain, contract, asset, decimals) VALUES ($1, $2, 'USDC', 6)",
        CHAIN,
        token,
    )
    (hot,) = engine.wallets
    await anvil.receipt(await anvil.token_mint(token, hot, 1_000 * 10**6))
    await anvil.set_balance(hot, 10 * WEI)
    settings = payout_settings.model_copy(update={"payout_token_fee": Decimal("0.5")})
    engine.settings = settings
    account = await funded_account(owner_pool, "USDC", Decimal("100"))
    eth_before = await _eth(anvil, hot)
    payout = await request_payout(pool, settings, account, "12.5", fresh_address())

    await settle_all(engine, anvil)

    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    assert row["status"] == "confirmed"
    gas = Decimal(eth_before - await _eth(anvil, hot)) / WEI
    assert gas > 0
    assert await _gas_transfers(pool) == [(f"{CHAIN}:{row['landed_tx_hash']}", gas)]
    assert await system_balance(pool, GAS) == gas
    assert await system_balance(pool, CUSTODY_ETH) == -gas
    assert await system_balance(pool, f"custody:{CHAIN}:USDC") == Decimal("-12.5")
    assert await system_balance(pool, "fees:USDC") == Decimal("0.5")  # the customer's fee
    await assert_books_balance(pool)


async def test_a_reverted_payout_posts_the_gas_it_spent(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    refuses_value = await anvil.deploy_token("No Receive", "NOR", 6)  # no payable fallback
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    before = await _eth(anvil, hot)
    payout = await request_payout(pool, payout_settings, account, "1", refuses_value)

    await settle_all(engine, anvil)

    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    assert (row["status"], row["receipt_status"]) == ("failed", 0)
    gas = Decimal(before - await _eth(anvil, hot)) / WEI
    assert gas > 0
    assert await _gas_transfers(pool) == [(f"{CHAIN}:{row['landed_tx_hash']}", gas)]
    assert await system_balance(pool, GAS) == gas
    assert await system_balance(pool, CUSTODY_ETH) == -gas  # nothing but the gas left
    await assert_books_balance(pool)


async def test_a_fee_bumped_payout_posts_the_gas_of_the_transaction_that_landed(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    """A payout stuck in the mempool is replaced at the same nonce with higher fees; only
    one of the two signed transactions is mined, so only its gas is posted (once), and the
    custody account moves exactly as the hot wallet's balance did."""
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    await anvil.set_automine(False)
    low_fee = payout_settings.model_copy(update={"payout_priority_fee_wei": 1})
    engine.settings = low_fee
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    custody_before = await system_balance(pool, CUSTODY_ETH)
    chain_before = await _eth(anvil, hot)
    payout = await request_payout(pool, payout_settings, account, "1", fresh_address())
    await engine.tick()  # attempt 1 in the mempool, never mined
    engine.settings = low_fee.model_copy(update={"payout_stuck_after_s": 0.0})
    await engine.tick()  # stuck: attempt 2, same nonce, higher fees
    attempts = await pool.fetchval(
        "SELECT count(*) FROM payout_txs WHERE payout_id = $1", payout["id"]
    )
    assert attempts == 2
    await anvil.mine(1)
    engine.settings = payout_settings  # no more bumps
    await settle_all(engine, anvil)

    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    assert row["status"] == "confirmed"
    spent = Decimal(chain_before - await _eth(anvil, hot)) / WEI
    gas = spent - Decimal(1)
    assert gas > 0
    assert await _gas_transfers(pool) == [(f"{CHAIN}:{row['landed_tx_hash']}", gas)]
    assert await system_balance(pool, GAS) == gas
    assert await system_balance(pool, CUSTODY_ETH) == custody_before - spent
    await assert_books_balance(pool)
