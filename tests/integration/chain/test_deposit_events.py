"""A chain deposit's events in its merchant's stream, on anvil: deposit.pending when the
node shows the transfer, deposit.credited once final, deposit.reversed after a deep reorg,
and a second round (`<transfer id>~1`) when the chain gives the transfer back; every
lifecycle run after that records nothing twice."""

from __future__ import annotations

import uuid
from decimal import Decimal

import asyncpg
from redis.asyncio import Redis

from payflow.api.auth import create_merchant
from payflow.chain.finality import FinalityOracle
from payflow.chain.transfers import transfer_id
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ingress.service import assign_address
from payflow.ledger.accounts import create_account
from payflow_lab.anvil import WEI_PER_ETH, AnvilNode

from .deposit_support import (
    CHAIN,
    RecordingSink,
    chain_settings,
    deliver,
    generic_event,
    new_address,
    redis,
    run,
)

__all__ = ["redis"]  # fixture


async def _merchant_account(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> tuple[uuid.UUID, uuid.UUID, str]:
    """A merchant owning an ETH account with a fresh deposit address."""
    address = new_address()
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, f"m-{uuid.uuid4().hex[:6]}", admin=False)
        async with transaction(conn, settings):
            account = await create_account(conn, "ETH")
            await assign_address(conn, CHAIN, address, account.id)
    # the owner of an account is set by the operator's login (the service may not)
    await owner_pool.execute(
        "UPDATE accounts SET merchant_id = $2 WHERE id = $1", account.id, merchant
    )
    return merchant, account.id, address


async def _events(pool: asyncpg.Pool, merchant: uuid.UUID) -> list[tuple[str, str]]:
    rows = await pool.fetch(
        "SELECT type, subject_id FROM merchant_events WHERE merchant_id = $1"
        " ORDER BY created_at, type",
        merchant,
    )
    return [(row["type"], row["subject_id"]) for row in rows]


async def test_pending_credited_reversed_and_credited_again_each_once(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    database_url: str,
    migration_url: str,
    redis: Redis,
) -> None:
    settings = chain_settings(
        database_url, migration_url, anvil.url, eth_confirmation_policy="confirmations:1"
    )
    sink = RecordingSink()
    merchant, account, address = await _merchant_account(pool, owner_pool, settings)
    await anvil.mine(2)
    tx = await anvil.send_eth(address, WEI_PER_ETH)
    raw = await anvil.rpc.call("eth_getRawTransactionByHash", tx)
    await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
    tid = transfer_id(CHAIN, tx, -1)
    oracle = FinalityOracle(settings, redis, redis_settings=settings)
    try:
        await run(pool, settings, oracle, sink)  # verified: pending
        assert await _events(pool, merchant) == [("deposit.pending", tid)]
        [pending] = await pool.fetch(
            "SELECT data FROM merchant_events WHERE merchant_id = $1", merchant
        )
        assert pending["data"] == {
            "deposit_id": tid,
            "status": "pending",
            "account_id": str(account),
            "chain": CHAIN,
            "tx_hash": tx.lower(),
            "position": -1,
            "address": address,
            "contract": None,
            "asset": "ETH",
            "amount": "1.000000000000000000",
            "block_number": pending["data"]["block_number"],
            "block_hash": pending["data"]["block_hash"],
            "round": 0,
        }
        await anvil.mine(1)
        assert (await run(pool, settings, oracle, sink)).credited == 1
        await run(pool, settings, oracle, sink)  # nothing new
        assert await _events(pool, merchant) == [
            ("deposit.pending", tid),
            ("deposit.credited", tid),
        ]
        credited = await pool.fetchval(
            "SELECT data FROM merchant_events WHERE type = 'deposit.credited' AND subject_id = $1",
            tid,
        )
        assert credited["credited_amount"] == "1.000000000000000000"

        await anvil.reorg(3)  # deeper than N = 1: the credited transfer is gone
        assert (await run(pool, settings, oracle, sink)).reversed == 1
        await run(pool, settings, oracle, sink)
        reversed_ = await pool.fetchval(
            "SELECT data FROM merchant_events WHERE type = 'deposit.reversed' AND subject_id = $1",
            tid,
        )
        assert reversed_["status"] == "reversed"
        assert (reversed_["debited_amount"], reversed_["shortfall"]) == (
            "1.000000000000000000",
            None,
        )

        if await anvil.rpc.get_receipt(tx) is None:  # the same transaction mined again
            await anvil.rpc.send_raw_transaction(raw)
        await anvil.mine(2)
        runs = [await run(pool, settings, oracle, sink) for _ in range(4)]
        assert sum(r.credited for r in runs) == 1
        events = await _events(pool, merchant)
        assert sorted(events) == sorted(
            [
                ("deposit.pending", tid),
                ("deposit.credited", tid),
                ("deposit.reversed", tid),
                ("deposit.pending", f"{tid}~1"),
                ("deposit.credited", f"{tid}~1"),
            ]
        )
        again = await pool.fetchval(
            "SELECT data FROM merchant_events WHERE type = 'deposit.credited' AND subject_id = $1",
            f"{tid}~1",
        )
        assert again["round"] == 1 and Decimal(again["credited_amount"]) == 1
    finally:
        await oracle.aclose()
