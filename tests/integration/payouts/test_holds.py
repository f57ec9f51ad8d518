"""Holds without a chain: provider-reported withdrawals cannot spend held funds, a
replayed key holds nothing twice, and what cannot be paid out is refused with a field."""

from __future__ import annotations

import uuid
from decimal import Decimal

import asyncpg
import pytest

from payflow.chain.payouts.holds import PayoutKeyReused, PayoutRefused, place_payout
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import record_event
from payflow.ledger.posting import post_event
from payflow.ledger.records import EventType, Outcome
from tests.integration.payouts.conftest import fresh_address, funded_account, request_payout


@pytest.fixture
def hold_settings(settings: Settings, anvil_chain: str) -> Settings:
    return settings.model_copy(update={"payout_chain": anvil_chain})


async def _withdraw(
    pool: asyncpg.Pool, settings: Settings, account: uuid.UUID, amount: str
) -> Outcome:
    event_id = f"wd:test-{uuid.uuid4().hex}"
    async with pool.acquire() as conn, transaction(conn, settings):
        await record_event(
            conn,
            event_id=event_id,
            account_id=account,
            amount=amount,
            event_type=EventType.WITHDRAWAL,
            scale=18,
        )
    return (await post_event(pool, settings, event_id)).outcome


async def test_a_provider_withdrawal_cannot_spend_held_funds(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, hold_settings: Settings
) -> None:
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    await request_payout(pool, hold_settings, account, "4", fresh_address())
    assert await _withdraw(pool, hold_settings, account, "1") is Outcome.INSUFFICIENT_FUNDS
    assert await _withdraw(pool, hold_settings, account, "0.9") is Outcome.SUCCESS
    row = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    assert (row["balance"], row["held"]) == (Decimal("4.1"), Decimal("4.0021"))


async def test_a_replayed_key_holds_once_and_a_reused_key_is_refused(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, hold_settings: Settings
) -> None:
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    to = fresh_address()
    first = await request_payout(pool, hold_settings, account, "1", to, key="k1")
    again = await request_payout(pool, hold_settings, account, "1", to, key="k1")
    assert again["id"] == first["id"]
    assert await pool.fetchval("SELECT held FROM accounts WHERE id = $1", account) == Decimal(
        "1.0021"
    )
    with pytest.raises(PayoutKeyReused):
        await request_payout(pool, hold_settings, account, "2", to, key="k1")
    notes = await pool.fetchval("SELECT count(*) FROM outbox WHERE topic = 'notification.payout'")
    assert notes == 1


async def test_what_cannot_be_paid_out_is_refused_and_holds_nothing(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, hold_settings: Settings
) -> None:
    eur = await funded_account(owner_pool, "EUR", Decimal("10"))
    with pytest.raises(PayoutRefused) as caught:
        await request_payout(pool, hold_settings, eur, "1", fresh_address())
    assert caught.value.field == "body.chain"
    eth = await funded_account(owner_pool, "ETH", Decimal("10"))
    other_chain = hold_settings.model_copy(update={"payout_chain": "ETH_MAINNET"})
    with pytest.raises(PayoutRefused):
        async with pool.acquire() as conn, transaction(conn, other_chain):
            account = await conn.fetchrow("SELECT id, asset FROM accounts WHERE id = $1", eth)
            await place_payout(
                conn,
                hold_settings,
                merchant_id=uuid.UUID(int=1),
                idempotency_key="x",
                account=account,
                amount=Decimal(1),
                to_address=fresh_address(),
                chain="ETH_MAINNET",
                trace_id=None,
            )
    held = await pool.fetchval("SELECT sum(held) FROM accounts WHERE id = ANY($1)", [eur, eth])
    assert held == 0
