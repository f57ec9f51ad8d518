"""The node as an unreliable dependency, and the chain as the judge: the breaker opens
while anvil does not answer (deposits wait, with Redis down too), a reorg deeper than N
on a confirmations chain reverses a credit, and `recon --chain` finds what is wrong."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import asyncpg
from redis.asyncio import Redis

from payflow.alerts import Severity
from payflow.chain.breaker import BREAKER_STATE, BreakerState
from payflow.chain.finality import FinalityOracle
from payflow.chain.recon import reconcile_chain
from payflow.chain.recon_cli import run_chain_recon
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import record_and_announce
from payflow.ledger.posting import post_event
from payflow.ledger.records import EventType, Outcome
from payflow_lab.anvil import DEFAULT_ACCOUNTS, WEI_PER_ETH, AnvilNode
from tests.conftest import redis_prefix

from .deposit_support import (
    CHAIN,
    RecordingSink,
    balance,
    chain_settings,
    deliver,
    deposits,
    generic_event,
    ledger,
    open_account,
    oracle,
    pending,
    redis,
    register_token,
    run,
    settings,
)

__all__ = ["oracle", "redis", "settings"]  # fixtures


def _gauge(chain: str) -> float:
    return BREAKER_STATE.labels(chain)._value.get()


async def test_node_outage_opens_the_breaker_deposits_wait_then_credit_once(
    anvil: AnvilNode, pool: asyncpg.Pool, settings: Settings, redis: Redis
) -> None:
    account, address = await open_account(pool, settings, "ETH")
    tx = await anvil.send_eth(address, WEI_PER_ETH)
    await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
    quick = settings.model_copy(update={"rpc_timeout_s": 0.3})
    shared = FinalityOracle(quick, redis, redis_settings=quick)
    # a second replica whose Redis is down: the breaker runs on its own memory
    cut_off = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    alone = FinalityOracle(
        quick.model_copy(update={"redis_key_prefix": redis_prefix("alone")}),
        cut_off,
        redis_settings=quick.model_copy(update={"redis_key_prefix": redis_prefix("alone")}),
    )
    try:
        assert (await run(pool, quick, shared)).confirmed == 1
        await anvil.mine(2)
        anvil.pause()  # the node stops answering mid-run
        try:
            for _ in range(3):
                stats = await run(pool, quick, shared)
                assert stats.waiting == [CHAIN] and stats.credited == 0
            assert await shared.breakers[CHAIN].state() is BreakerState.OPEN
            assert _gauge(CHAIN) == BreakerState.OPEN
            assert (await run(pool, quick, shared)).waiting == [CHAIN]  # open: refused
            for _ in range(3):
                assert (await run(pool, quick, alone)).waiting == [CHAIN]
            assert await alone.breakers[CHAIN].state() is BreakerState.OPEN
        finally:
            anvil.resume()
        [deposit] = await deposits(pool)
        assert deposit["status"] == "verified"  # waiting, never failed
        assert await balance(pool, account) == 0 and await pending(pool, account) == 1

        await asyncio.sleep(quick.chain_breaker_open_s)  # the open period ends
        assert await shared.breakers[CHAIN].state() is BreakerState.HALF_OPEN
        credited = await run(pool, quick, shared)  # the one probe succeeds: closed
        assert credited.credited == 1
        assert await shared.breakers[CHAIN].state() is BreakerState.CLOSED
        assert await alone.breakers[CHAIN].state() is BreakerState.HALF_OPEN
        # its run starts with the node check (eth_chainId): that probe closes it
        assert (await run(pool, quick, alone)).credited == 0  # already credited
        assert await alone.breakers[CHAIN].state() is BreakerState.CLOSED
        assert await balance(pool, account) == Decimal(1)
        assert len(await ledger(pool, account)) == 1
    finally:
        await shared.aclose()
        await alone.aclose()
        await cut_off.aclose()


async def test_exactly_one_half_open_probe_across_replicas(
    settings: Settings, redis: Redis
) -> None:
    first = FinalityOracle(settings, redis, redis_settings=settings).breakers[CHAIN]
    second = FinalityOracle(settings, redis, redis_settings=settings).breakers[CHAIN]
    await redis.set(first._key("tripped"), "1")
    assert await first.state() is BreakerState.HALF_OPEN
    assert await first._take_probe() is True
    assert await second._take_probe() is False


async def test_a_reorg_deeper_than_n_after_credit_reverses_freezes_and_alerts(
    anvil: AnvilNode, pool: asyncpg.Pool, database_url: str, migration_url: str, redis: Redis
) -> None:
    settings = chain_settings(
        database_url, migration_url, anvil.url, eth_confirmation_policy="confirmations:1"
    )
    sink = RecordingSink()
    account, address = await open_account(pool, settings, "ETH")
    await anvil.mine(2)
    tx = await anvil.send_eth(address, WEI_PER_ETH)
    await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
    oracle = FinalityOracle(settings, redis, redis_settings=settings)
    try:
        await run(pool, settings, oracle, sink)
        await anvil.mine(1)  # one confirmation: final under confirmations:1
        assert (await run(pool, settings, oracle, sink)).credited == 1
        # 0.4 of it is spent before the chain changes its mind
        async with pool.acquire() as conn, transaction(conn, settings):
            await record_and_announce(
                conn,
                event_id="wd:test-spend",
                account_id=account,
                amount="0.4",
                event_type=EventType.WITHDRAWAL,
                scale=18,
                trace_id="spend",
            )
        assert (await post_event(pool, settings, "wd:test-spend")).outcome is Outcome.SUCCESS

        await anvil.reorg(3)  # deeper than N = 1: the credited transfer is gone
        stats = await run(pool, settings, oracle, sink)
    finally:
        await oracle.aclose()
    assert stats.reversed == 1
    tid = f"{CHAIN}:{tx}:-1"
    assert await ledger(pool, account) == [
        (f"chain:{tid}", "deposit", Decimal(1)),
        ("wd:test-spend", "withdrawal", Decimal("-0.4")),
        (f"reorg:{tid}", "deposit_reversal", Decimal("-0.6")),
    ]
    assert await balance(pool, account) == 0  # never negative
    [deposit] = await deposits(pool)
    assert (deposit["status"], deposit["shortfall"]) == ("reversed", Decimal("0.4"))
    assert deposit["reversal_event_id"] == f"reorg:{tid}"
    status = await pool.fetchval("SELECT status FROM accounts WHERE id = $1", account)
    assert status == "frozen"
    [(key, severity, _message, details)] = sink.fired
    assert (key, severity) == (f"chain.reorg_shortfall:{tid}", Severity.CRITICAL)
    assert details["shortfall"] == "0.4"


async def test_recon_chain_finds_an_injected_credit_and_a_hidden_transfer(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    settings: Settings,
    oracle: FinalityOracle,
) -> None:
    account, address = await open_account(pool, settings, "ETH")
    seen = await anvil.send_eth(address, WEI_PER_ETH)
    await deliver(pool, settings, generic_event(address, "1", seen, "ETH", None))
    hidden = await anvil.send_eth(address, 2 * WEI_PER_ETH)  # nobody reports it
    await anvil.mine(3)
    await run(pool, settings, oracle)
    await run(pool, settings, oracle)
    assert await balance(pool, account) == Decimal(1)
    clean_up_to = await anvil.finalized()

    injected = f"chain:{CHAIN}:0x{'99' * 32}:-1"  # a credit no transfer is behind
    async with pool.acquire() as conn, transaction(conn, settings):
        await record_and_announce(
            conn,
            event_id=injected,
            account_id=account,
            amount="5",
            event_type=EventType.DEPOSIT,
            scale=18,
            trace_id="injected",
        )
    await post_event(pool, settings, injected)

    report = await reconcile_chain(pool, settings, oracle, CHAIN, from_block=0)
    assert report.to_block >= clean_up_to
    assert report.uncredited == [f"{CHAIN}:{hidden}:-1"]
    assert report.credit_without_transfer == [injected]
    assert report.transfers_seen == 2 and not report.clean
    assert (
        await run_chain_recon(settings, from_block=0, database=settings, redis_settings=settings)
        is False
    )  # the command exits 1


async def test_recon_chain_lists_what_payflow_never_credits_without_going_dirty(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    oracle: FinalityOracle,
) -> None:
    """1 wei of ETH to a USDC account's address, or a registered token to an ETH
    account's, which the scanner never credits (asset_mismatch), does not make every recon
    run DIRTY with a critical alert nothing can clear: such transfers are listed as not
    creditable, with the reason; a transfer that should have been credited still makes
    the report dirty."""
    token = await anvil.deploy_token(decimals=6)
    await register_token(owner_pool, token)
    usdc_account, usdc_address = await open_account(pool, settings, "USDC")
    eth_account, eth_address = await open_account(pool, settings, "ETH")
    dust = await anvil.send_eth(usdc_address, 1)
    await anvil.token_mint(token, DEFAULT_ACCOUNTS[0], 10_000_000)
    wrong_token = await anvil.token_transfer(token, eth_address, 5)
    await anvil.mine(3)
    await run(pool, settings, oracle)
    assert await balance(pool, usdc_account) == 0
    assert await balance(pool, eth_account) == 0

    report = await reconcile_chain(pool, settings, oracle, CHAIN, from_block=0)
    assert report.clean, report.summary()
    assert report.uncredited == []
    assert sorted(report.not_creditable) == sorted(
        [f"{CHAIN}:{dust}:-1 (asset_mismatch)", f"{CHAIN}:{wrong_token}:0 (asset_mismatch)"]
    )
    assert "not_creditable=2" in report.summary() and "result=clean" in report.summary()
    hidden = await anvil.send_eth(eth_address, WEI_PER_ETH)  # creditable, never reported
    await anvil.mine(3)
    dirty = await reconcile_chain(pool, settings, oracle, CHAIN, from_block=0)
    assert dirty.uncredited == [f"{CHAIN}:{hidden}:-1"] and not dirty.clean
