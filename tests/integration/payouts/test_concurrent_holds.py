"""30 concurrent 1-ETH payouts over HTTP to a real API process (2 uvicorn workers) from
an account whose available balance covers exactly ten with their fee holds."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal

import asyncpg
import httpx
import pytest
from redis.asyncio import Redis

from payflow.chain.payouts.engine import PayoutEngine
from payflow.config import Settings
from payflow_lab.anvil import AnvilNode
from tests.conftest import redis_prefix
from tests.integration.api.server import running_api
from tests.integration.payouts.conftest import WEI, fresh_address, settle_all

API_KEY = "payout-test-key-0123456789"
FEE_HOLD = Decimal("0.0021")  # 21000 gas x the 100 gwei ceiling


@pytest.mark.slow
async def test_thirty_concurrent_payouts_hold_at_most_the_balance(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 100 * WEI)
    monkeypatch.setenv("PAYOUT_CHAIN", payout_settings.payout_chain)
    api_settings = payout_settings.model_copy(
        update={
            "api_key": API_KEY,
            "admin_api_key": API_KEY + "-admin",
            "redis_key_prefix": redis_prefix("payouts"),
            "rate_limit_per_minute": 100_000,
            "provider_webhook_secret": "payout-test-provider-secret-0123456789",
        }
    )
    recipients = [fresh_address() for _ in range(30)]
    headers = {"X-API-Key": API_KEY}
    with running_api(api_settings, workers=2) as base:
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
            created = await client.post("/api/v1/accounts", json={"asset": "ETH"})
            account_id = created.json()["account_id"]
            await owner_pool.execute(
                "UPDATE accounts SET balance = $2, initial_balance = $2 WHERE id = $1",
                uuid.UUID(account_id),
                10 * (1 + FEE_HOLD),
            )
            lowest: list[Decimal] = []
            done = asyncio.Event()

            async def sample() -> None:
                while not done.is_set():
                    lowest.append(
                        await pool.fetchval(
                            "SELECT balance - held FROM accounts WHERE id = $1",
                            uuid.UUID(account_id),
                        )
                    )
                    await asyncio.sleep(0.005)

            sampler = asyncio.create_task(sample())

            async def pay(to: str, key: str) -> httpx.Response:
                return await client.post(
                    f"/api/v1/accounts/{account_id}/withdrawals",
                    json={"amount": "1", "to_address": to},
                    headers={"Idempotency-Key": key},
                )

            keys = [uuid.uuid4().hex for _ in recipients]
            answers = await asyncio.gather(
                *(pay(to, k) for to, k in zip(recipients, keys, strict=True))
            )
            view = (await client.get(f"/api/v1/accounts/{account_id}")).json()
            accepted = [a for a in answers if a.status_code == 202]
            refused = [a for a in answers if a.status_code == 409]
            assert (len(accepted), len(refused)) == (10, 20), [a.text for a in answers]
            assert {a.json()["type"] for a in refused} == {
                "https://payflow.dev/problems/insufficient-funds"
            }
            assert view["held"] == "10.021000000000000000"
            assert view["available"] == "0.000000000000000000"
            first = answers.index(accepted[0])
            replay = await pay(recipients[first], keys[first])  # the same request again
            assert (replay.status_code, replay.json()) == (202, accepted[0].json())
            assert (await client.get(f"/api/v1/accounts/{account_id}")).json() == view

            await settle_all(engine, anvil)
            done.set()
            await sampler
            final = (await client.get(f"/api/v1/accounts/{account_id}")).json()
            payout_id = accepted[0].json()["payout_id"]
            read = (await client.get(f"/api/v1/payouts/{payout_id}")).json()
            assert (read["status"], read["amount"]) == ("confirmed", "1.000000000000000000")
            assert read["tx_hash"] is not None and read["fee_paid"] is not None

    redis = Redis.from_url(payout_settings.redis_url)
    try:
        keys = [k async for k in redis.scan_iter(match=api_settings.redis_key_prefix + "*")]
        if keys:
            await redis.delete(*keys)
    finally:
        await redis.aclose()
    assert min(lowest) >= 0
    paid = [await anvil.rpc.get_balance(to) for to in recipients]
    assert sum(paid) == 10 * WEI and sorted(set(paid)) == [0, WEI]
    rows = await pool.fetch(
        "SELECT event_type, amount FROM balance_events WHERE account_id = $1",
        uuid.UUID(account_id),
    )
    debits = [r["amount"] for r in rows if r["event_type"] == "withdrawal"]
    fees = [r["amount"] for r in rows if r["event_type"] == "withdrawal_fee"]
    assert debits == [Decimal(-1)] * 10 and len(fees) == 10
    paid_fees = await pool.fetch("SELECT fee_paid FROM payouts WHERE status = 'confirmed'")
    assert sorted(-f for f in fees) == sorted(p["fee_paid"] for p in paid_fees)
    assert all(0 < -f < FEE_HOLD for f in fees)  # the excess hold was released
    spent = sum(-f for f in fees)
    assert final["held"] == "0.000000000000000000"
    assert Decimal(final["balance"]) == 10 * FEE_HOLD - spent
    assert final["available"] == final["balance"]
