"""A payout's events in the stream of the merchant owning its account, on anvil:
payout.held when placed, payout.sent when the node accepts it, payout.confirmed or
payout.failed when final, each once however often the engine ticks."""

from __future__ import annotations

import uuid
from decimal import Decimal

import asyncpg

from payflow.api.auth import create_merchant
from payflow.chain.payouts.engine import PayoutEngine
from payflow.config import Settings
from payflow_lab.anvil import AnvilNode
from tests.integration.payouts.conftest import (
    CHAIN,
    WEI,
    fresh_address,
    funded_account,
    request_payout,
    settle_all,
)


async def _owned(pool: asyncpg.Pool, owner_pool: asyncpg.Pool, account: uuid.UUID) -> uuid.UUID:
    """A merchant made the owner of `account` (by the operator's login)."""
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, f"m-{uuid.uuid4().hex[:6]}", admin=False)
    await owner_pool.execute(
        "UPDATE accounts SET merchant_id = $2 WHERE id = $1", account, merchant
    )
    return merchant


async def _events(pool: asyncpg.Pool, merchant: uuid.UUID) -> list[tuple[str, str, dict]]:
    rows = await pool.fetch(
        "SELECT type, subject_id, data FROM merchant_events WHERE merchant_id = $1"
        " ORDER BY created_at, id",
        merchant,
    )
    return [(row["type"], row["subject_id"], row["data"]) for row in rows]


async def test_a_confirmed_payout_records_held_sent_confirmed_once(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    merchant = await _owned(pool, owner_pool, account)
    to = fresh_address()
    payout = await request_payout(pool, payout_settings, account, "1.5", to)
    [(kind, subject, held)] = await _events(pool, merchant)
    assert (kind, subject) == ("payout.held", str(payout["id"]))
    assert held["amount"] == "1.500000000000000000"  # ETH's scale, a string
    assert (held["status"], held["to_address"], held["tx_hash"]) == ("held", to, None)
    assert held["account_id"] == str(account) and held["chain"] == CHAIN

    await settle_all(engine, anvil)
    for _ in range(2):  # more ticks record nothing
        await engine.tick()
    events = await _events(pool, merchant)
    assert [(k, s) for k, s, _ in events] == [
        ("payout.held", str(payout["id"])),
        ("payout.sent", str(payout["id"])),
        ("payout.confirmed", str(payout["id"])),
    ]
    sent, confirmed = events[1][2], events[2][2]
    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    assert sent["tx_hash"] == row["landed_tx_hash"]
    assert confirmed["tx_hash"] == row["landed_tx_hash"]
    assert confirmed["block_number"] == row["block_number"]
    assert Decimal(confirmed["fee_paid"]) == row["fee_paid"]
    assert confirmed["status"] == "confirmed" and confirmed["failure"] is None


async def test_a_reverted_payout_records_failed(
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
    await anvil.receipt(await anvil.token_set_paused(token, True))  # the transfer reverts
    account = await funded_account(owner_pool, "USDC", Decimal("50"))
    merchant = await _owned(pool, owner_pool, account)
    payout = await request_payout(pool, settings, account, "20", fresh_address())

    await settle_all(engine, anvil)
    await engine.tick()

    events = await _events(pool, merchant)
    assert [k for k, _, _ in events] == ["payout.held", "payout.sent", "payout.failed"]
    failed = events[2][2]
    assert failed["payout_id"] == str(payout["id"])
    assert (failed["amount"], failed["fee_paid"], failed["fee_held"]) == (
        "20.000000",
        "0.500000",
        "0.500000",
    )
    assert failed["contract"] == token and failed["failure"]
