"""ERC-20 payouts: the exact amount in the token's 6 decimals; a reverting transfer voided
with the amount back, the nonce consumed and the fee charged (its gas was spent)."""

from __future__ import annotations

from decimal import Decimal

import asyncpg

from payflow.chain.payouts.engine import PayoutEngine
from payflow.config import Settings
from payflow_lab.anvil import AnvilNode
from tests.integration.payouts.conftest import (
    CHAIN,
    WEI,
    fresh_address,
    funded_account,
    ledger_rows,
    request_payout,
    settle_all,
)


async def _token(anvil: AnvilNode, owner_pool: asyncpg.Pool, engine: PayoutEngine) -> str:
    token = await anvil.deploy_token("Test USD Coin", "USDC", 6)
    await owner_pool.execute(
        "INSERT INTO chain_tokens (chain, contract, asset, decimals) VALUES ($1, $2, 'USDC', 6)",
        CHAIN,
        token,
    )
    (hot,) = engine.wallets
    await anvil.receipt(await anvil.token_mint(token, hot, 1_000 * 10**6))
    await anvil.set_balance(hot, 10 * WEI)
    return token


async def test_erc20_payout_sends_the_exact_amount(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    token = await _token(anvil, owner_pool, engine)
    settings = payout_settings.model_copy(update={"payout_token_fee": Decimal("0.5")})
    engine.settings = settings
    account = await funded_account(owner_pool, "USDC", Decimal("100"))
    to = fresh_address()
    payout = await request_payout(pool, settings, account, "12.345678", to)
    assert payout["contract"] == token and payout["fee_hold"] == Decimal("0.5")

    await settle_all(engine, anvil)

    assert await anvil.token_balance(token, to) == 12_345_678
    row = await pool.fetchrow("SELECT status, fee_paid FROM payouts WHERE id = $1", payout["id"])
    assert (row["status"], row["fee_paid"]) == ("confirmed", Decimal("0.5"))
    rows = await ledger_rows(pool, account)
    assert [(r["event_type"], r["amount"]) for r in rows] == [
        ("withdrawal", Decimal("-12.345678")),
        ("withdrawal_fee", Decimal("-0.5")),
    ]
    acct = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    assert (acct["balance"], acct["held"]) == (Decimal("87.154322"), Decimal(0))
    notes = await pool.fetch(
        "SELECT payload->>'type' AS t FROM outbox WHERE topic = 'notification.payout' ORDER BY id"
    )
    assert [n["t"] for n in notes] == ["payout.held", "payout.sent", "payout.confirmed"]


async def test_reverted_payout_is_voided_and_the_funds_come_back(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    token = await _token(anvil, owner_pool, engine)
    settings = payout_settings.model_copy(update={"payout_token_fee": Decimal("0.5")})
    engine.settings = settings
    await anvil.receipt(await anvil.token_set_paused(token, True))
    account = await funded_account(owner_pool, "USDC", Decimal("50"))
    to = fresh_address()
    payout = await request_payout(pool, settings, account, "20", to)
    held = await pool.fetchval("SELECT held FROM accounts WHERE id = $1", account)
    assert held == Decimal("20.5")

    await settle_all(engine, anvil)

    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    assert (row["status"], row["receipt_status"], row["nonce"]) == ("failed", 0, 0)
    assert row["fee_paid"] == Decimal("0.5")
    assert await anvil.token_balance(token, to) == 0
    rows = await ledger_rows(pool, account)
    assert [(r["event_type"], r["amount"]) for r in rows] == [("withdrawal_fee", Decimal("-0.5"))]
    acct = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    assert (acct["balance"], acct["held"]) == (Decimal("49.5"), Decimal(0))
    (hot,) = engine.wallets
    assert int(await anvil.rpc.call("eth_getTransactionCount", hot, "latest"), 16) == 1
    notes = await pool.fetch(
        "SELECT payload->>'type' AS t FROM outbox WHERE topic = 'notification.payout' ORDER BY id"
    )
    assert [n["t"] for n in notes] == ["payout.held", "payout.sent", "payout.failed"]


async def test_a_native_payout_that_reverts_charges_the_gas_it_spent(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    """ETH sent to a contract that refuses value reverts: the amount comes back and the
    gas the reverted transaction paid is charged, so the hot wallet's gas is never left
    unledgered for a merchant to drain, payout after payout."""
    refuses_value = await anvil.deploy_token("No Receive", "NOR", 6)  # no payable fallback
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    payout = await request_payout(pool, payout_settings, account, "1", refuses_value)
    before = int(await anvil.rpc.call("eth_getBalance", hot, "latest"), 16)

    await settle_all(engine, anvil)

    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    assert (row["status"], row["receipt_status"]) == ("failed", 0)
    spent_wei = before - int(await anvil.rpc.call("eth_getBalance", hot, "latest"), 16)
    assert spent_wei > 0  # the reverted transaction was mined and paid its gas
    assert row["fee_paid"] == Decimal(spent_wei) / WEI
    rows = await ledger_rows(pool, account)
    assert [(r["event_type"], r["amount"]) for r in rows] == [
        ("withdrawal_fee", -Decimal(spent_wei) / WEI)
    ]
    acct = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    assert (acct["balance"], acct["held"]) == (Decimal("5") - Decimal(spent_wei) / WEI, 0)
    assert int(await anvil.rpc.call("eth_getBalance", refuses_value, "latest"), 16) == 0
