"""A reorg reversal of a credited deposit the customer already spent, in the books: the
customer is debited what the balance covers (customer -> custody), the rest is payflow's
loss (reorg_loss -> custody, transfer `reorg_shortfall`), so the custody account is back
where it was before the deposit and the trial balance stays zero."""

from __future__ import annotations

from decimal import Decimal

import asyncpg
import pytest
from redis.asyncio import Redis

from payflow.chain import reversal
from payflow.chain.finality import FinalityOracle
from payflow.db.tx import transaction
from payflow.ledger.accounts import record_and_announce
from payflow.ledger.posting import post_event
from payflow.ledger.records import EventType, Outcome
from payflow_lab.anvil import WEI_PER_ETH, AnvilNode
from tests.integration.ledger.books import assert_books_balance, system_balance

from .deposit_support import (
    CHAIN,
    RecordingSink,
    balance,
    chain_settings,
    deliver,
    deposits,
    generic_event,
    open_account,
    redis,
    run,
)

__all__ = ["redis"]  # fixtures

CUSTODY = f"custody:{CHAIN}:ETH"


async def _balance(pool: asyncpg.Pool, code: str) -> Decimal:
    return await system_balance(pool, code) or Decimal(0)


@pytest.mark.parametrize("spent", ["0.4", "1"])
async def test_a_spent_deposit_reversed_by_a_reorg_books_the_shortfall(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    database_url: str,
    migration_url: str,
    redis: Redis,
    spent: str,
) -> None:
    settings = chain_settings(
        database_url, migration_url, anvil.url, eth_confirmation_policy="confirmations:1"
    )
    account, address = await open_account(pool, settings, "ETH")
    await anvil.mine(2)
    tx = await anvil.send_eth(address, WEI_PER_ETH)
    await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
    oracle = FinalityOracle(settings, redis, redis_settings=settings)
    try:
        await run(pool, settings, oracle, RecordingSink())
        await anvil.mine(1)
        assert (await run(pool, settings, oracle, RecordingSink())).credited == 1
        custody_credited = await _balance(pool, CUSTODY)
        async with pool.acquire() as conn, transaction(conn, settings):
            await record_and_announce(
                conn,
                event_id="wd:test-spend",
                account_id=account,
                amount=spent,
                event_type=EventType.WITHDRAWAL,
                scale=18,
                trace_id="spend",
            )
        assert (await post_event(pool, settings, "wd:test-spend")).outcome is Outcome.SUCCESS
        loss_before = await _balance(pool, "reorg_loss:ETH")
        custody_spent = await _balance(pool, CUSTODY)

        await anvil.reorg(3)
        assert (await run(pool, settings, oracle, RecordingSink())).reversed == 1
    finally:
        await oracle.aclose()
    tid = f"{CHAIN}:{tx}:-1"
    shortfall = Decimal(spent)
    [deposit] = await deposits(pool)
    assert (deposit["status"], deposit["shortfall"]) == ("reversed", shortfall)
    # the account afterwards: empty, frozen, never negative
    assert await balance(pool, account) == 0
    assert await pool.fetchval("SELECT status FROM accounts WHERE id = $1", account) == "frozen"
    # the loss is visible, and custody lost exactly the deposit the chain took back
    assert await _balance(pool, "reorg_loss:ETH") - loss_before == shortfall
    # (the test's spend is a provider-reported withdrawal: custody:external, not this chain)
    assert custody_spent == custody_credited
    assert await _balance(pool, CUSTODY) == custody_credited - Decimal(1)
    legs = await pool.fetch(
        "SELECT l.ledger_account, l.amount FROM ledger_transfers t"
        " JOIN ledger_legs l ON l.transfer_id = t.id"
        " WHERE t.kind = 'reorg_shortfall' AND t.reference = $1 ORDER BY l.amount",
        f"reorg:{tid}",
    )
    assert [(r["ledger_account"], r["amount"]) for r in legs] == [
        ("reorg_loss:ETH", -shortfall),
        (CUSTODY, shortfall),
    ]
    await assert_books_balance(pool)


async def test_the_spent_deposit_mined_again_takes_the_loss_back(
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
    tid = f"{CHAIN}:{tx}:-1"
    oracle = FinalityOracle(settings, redis, redis_settings=settings)
    try:
        await run(pool, settings, oracle, RecordingSink())
        await anvil.mine(1)
        assert (await run(pool, settings, oracle, RecordingSink())).credited == 1
        custody_credited = await _balance(pool, CUSTODY)
        async with pool.acquire() as conn, transaction(conn, settings):
            await record_and_announce(
                conn,
                event_id="wd:spent",
                account_id=account,
                amount="0.4",
                event_type=EventType.WITHDRAWAL,
                scale=18,
                trace_id="spent",
            )
        assert (await post_event(pool, settings, "wd:spent")).outcome is Outcome.SUCCESS
        await anvil.reorg(3)
        assert (await run(pool, settings, oracle, RecordingSink())).reversed == 1
        assert await _balance(pool, "reorg_loss:ETH") == Decimal("0.4")
        assert await _balance(pool, CUSTODY) == custody_credited - 1

        if await anvil.rpc.get_receipt(tx) is None:
            await anvil.rpc.send_raw_transaction(raw)
        await anvil.mine(2)
        await anvil.receipt(tx)
        runs = [await run(pool, settings, oracle, RecordingSink()) for _ in range(4)]
        assert sum(r.credited for r in runs) == 1
    finally:
        await oracle.aclose()
    assert await balance(pool, account) == Decimal("0.6")
    # the chain holds the whole deposit again, and so does the custody account; no loss
    assert await _balance(pool, CUSTODY) == custody_credited
    assert await _balance(pool, "reorg_loss:ETH") == 0
    kinds = await pool.fetch(
        "SELECT kind, reference FROM ledger_transfers WHERE kind LIKE 'reorg%' ORDER BY id"
    )
    assert [(r["kind"], r["reference"]) for r in kinds] == [
        ("reorg_shortfall", f"reorg:{tid}"),
        ("reorg_recovery", f"chain:{tid}~1"),
    ]
    await assert_books_balance(pool)


async def test_a_reversal_debit_refused_after_a_concurrent_spend_books_it_all_as_loss(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    database_url: str,
    migration_url: str,
    redis: Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reversal decides its debit (the whole deposit: the balance covers it), then a
    withdrawal posts before the reversal's debit does: the debit is refused, the whole
    deposit becomes the shortfall (transfer `<event id>:refused`), the account is frozen,
    custody is restored all the same and the books stay balanced."""
    settings = chain_settings(
        database_url, migration_url, anvil.url, eth_confirmation_policy="confirmations:1"
    )
    account, address = await open_account(pool, settings, "ETH")
    await anvil.mine(2)
    tx = await anvil.send_eth(address, WEI_PER_ETH)
    await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
    tid = f"{CHAIN}:{tx}:-1"
    real_post_event = reversal.post_event
    spent: list[str] = []

    async def spend_first(*args: object, **kwargs: object) -> object:
        # The concurrent spend lands between the reversal's decision and its posting.
        if not spent:
            async with pool.acquire() as conn, transaction(conn, settings):
                await record_and_announce(
                    conn,
                    event_id="wd:racing-spend",
                    account_id=account,
                    amount="0.7",
                    event_type=EventType.WITHDRAWAL,
                    scale=18,
                    trace_id="racing",
                )
            spent.append((await real_post_event(pool, settings, "wd:racing-spend")).outcome)
        return await real_post_event(*args, **kwargs)  # type: ignore[arg-type]

    oracle = FinalityOracle(settings, redis, redis_settings=settings)
    try:
        await run(pool, settings, oracle, RecordingSink())
        await anvil.mine(1)
        assert (await run(pool, settings, oracle, RecordingSink())).credited == 1
        custody_credited = await _balance(pool, CUSTODY)
        loss_before = await _balance(pool, "reorg_loss:ETH")
        monkeypatch.setattr(reversal, "post_event", spend_first)
        await anvil.reorg(3)
        assert (await run(pool, settings, oracle, RecordingSink())).reversed == 1
    finally:
        await oracle.aclose()
    assert spent == [Outcome.SUCCESS]
    [deposit] = await deposits(pool)
    assert (deposit["status"], deposit["shortfall"]) == ("reversed", Decimal(1))
    refused = await pool.fetchval(
        "SELECT outcome FROM processed_events WHERE event_id = $1", f"reorg:{tid}"
    )
    assert refused == str(Outcome.INSUFFICIENT_FUNDS)
    # The customer keeps what the spend left; the account is frozen; never negative.
    assert await balance(pool, account) == Decimal("0.3")
    assert await pool.fetchval("SELECT status FROM accounts WHERE id = $1", account) == "frozen"
    # The whole deposit is payflow's loss, and custody lost exactly what the chain took back.
    assert await _balance(pool, "reorg_loss:ETH") - loss_before == Decimal(1)
    assert await _balance(pool, CUSTODY) == custody_credited - Decimal(1)
    legs = await pool.fetch(
        "SELECT l.ledger_account, l.amount FROM ledger_transfers t"
        " JOIN ledger_legs l ON l.transfer_id = t.id"
        " WHERE t.kind = 'reorg_shortfall' AND t.reference = $1 ORDER BY l.amount",
        f"reorg:{tid}:refused",
    )
    assert [(r["ledger_account"], r["amount"]) for r in legs] == [
        ("reorg_loss:ETH", Decimal(-1)),
        (CUSTODY, Decimal(1)),
    ]
    await assert_books_balance(pool)
