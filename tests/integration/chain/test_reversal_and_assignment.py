"""A deposit a deep reorg reversed is watched and credited again, exactly once, when the
same transaction is mined again (and reconciliation does not count `reversed` as
credited); value that reached an address before it was assigned is "not creditable:
before assignment" for the scanner, the webhook verification and recon alike."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import asyncpg
from redis.asyncio import Redis

from payflow.chain.finality import FinalityOracle
from payflow.chain.recon import reconcile_chain
from payflow.chain.transfers import transfer_id
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ingress.service import assign_address
from payflow.ledger.accounts import create_account, record_and_announce
from payflow.ledger.posting import post_event
from payflow.ledger.records import EventType, Outcome
from payflow_lab.anvil import DEFAULT_ACCOUNTS, WEI_PER_ETH, AnvilNode, encode_call

from .deposit_support import (
    CHAIN,
    RecordingSink,
    balance,
    chain_settings,
    deliver,
    deposits,
    generic_event,
    ledger,
    new_address,
    open_account,
    redis,
    register_token,
    run,
)
from .scanning import build_world

__all__ = ["redis"]  # fixture
USDC_25 = 25_000_000  # 25 USDC in base units (6 decimals)


async def test_a_reversed_deposit_mined_again_is_credited_again_exactly_once(
    anvil: AnvilNode, pool: asyncpg.Pool, database_url: str, migration_url: str, redis: Redis
) -> None:
    settings = chain_settings(
        database_url, migration_url, anvil.url, eth_confirmation_policy="confirmations:1"
    )
    sink = RecordingSink()
    account, address = await open_account(pool, settings, "ETH")
    await anvil.mine(2)
    tx = await anvil.send_eth(address, WEI_PER_ETH)
    raw = await anvil.rpc.call("eth_getRawTransactionByHash", tx)
    await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
    tid = transfer_id(CHAIN, tx, -1)
    oracle = FinalityOracle(settings, redis, redis_settings=settings)
    try:
        await run(pool, settings, oracle, sink)
        await anvil.mine(1)
        assert (await run(pool, settings, oracle, sink)).credited == 1
        async with pool.acquire() as conn, transaction(conn, settings):  # 0.4 is spent
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
        await anvil.reorg(3)  # deeper than N = 1: the credited transfer is gone
        assert (await run(pool, settings, oracle, sink)).reversed == 1
        assert await balance(pool, account) == 0  # 0.6 debited, 0.4 short, frozen
        for _ in range(2):  # still gone: it stays reversed, watched
            assert (await run(pool, settings, oracle, sink)).credited == 0
        [deposit] = await deposits(pool)
        assert deposit["status"] == "reversed"

        # the same signed transaction is mined again, and is final (1 confirmation)
        if await anvil.rpc.get_receipt(tx) is None:
            await anvil.rpc.send_raw_transaction(raw)
        await anvil.mine(2)
        receipt = await anvil.receipt(tx)
        # reconciliation: a final transfer behind a REVERSED deposit is uncredited
        report = await reconcile_chain(pool, settings, oracle, CHAIN, from_block=0)
        assert report.uncredited == [tid] and not report.clean

        runs = [await run(pool, settings, oracle, sink) for _ in range(4)]
        assert sum(r.reincluded for r in runs) == 1
        assert sum(r.credited for r in runs) == 1
        # the transfer exists again: the customer had 1, spent 0.4, keeps 0.6
        assert await balance(pool, account) == Decimal("0.6")
        assert await ledger(pool, account) == [
            (f"chain:{tid}", "deposit", Decimal(1)),
            ("wd:spent", "withdrawal", Decimal("-0.4")),
            (f"reorg:{tid}", "deposit_reversal", Decimal("-0.6")),
            (f"chain:{tid}~1", "deposit", Decimal("0.6")),
        ]
        [deposit] = await deposits(pool)
        assert (deposit["status"], deposit["shortfall"]) == ("credited", None)
        assert deposit["block_hash"] == receipt["blockHash"]
        assert deposit["credit_event_id"] == f"chain:{tid}~1"
        assert deposit["past_credit_events"] == [f"chain:{tid}"]
        report = await reconcile_chain(pool, settings, oracle, CHAIN, from_block=0)
        assert report.clean, report.summary()
        assert report.uncredited == [] and report.credit_without_transfer == []
    finally:
        await oracle.aclose()


async def test_value_before_assignment_is_not_creditable_on_every_path(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    database_url: str,
    migration_url: str,
) -> None:
    """Old behaviour: the scanner ignored it (it walked the block before the address was
    watched), `recon --chain` called it uncredited and a signed webhook credited it."""
    world = await build_world(
        pool, owner_pool, settings, anvil, chain_assignment_slack_s=1.0, chain_recheck_s=0.001
    )
    address = new_address()
    early = await anvil.send_eth(address, WEI_PER_ETH)  # nobody was given this address yet
    await asyncio.sleep(3.5)  # block timestamps are whole seconds (and may run ahead)
    async with pool.acquire() as conn, transaction(conn, world.settings):
        account = await create_account(conn, "ETH")
        await assign_address(conn, CHAIN, address, account.id)
    late = await anvil.send_eth(address, 2 * WEI_PER_ETH)
    await anvil.mine(3)
    early_id, late_id = transfer_id(CHAIN, early, -1), transfer_id(CHAIN, late, -1)

    await world.scanner.catch_up(CHAIN)  # walks both blocks with the address watched
    lifecycle = chain_settings(
        database_url,
        migration_url,
        anvil.url,
        chain_assignment_slack_s=1.0,
        redis_key_prefix=world.settings.redis_key_prefix,
    )
    for tx, amount in ((early, "1"), (late, "2")):  # a signed webhook reports both
        await deliver(pool, lifecycle, generic_event(address, amount, tx, "ETH", None))
    oracle = FinalityOracle(lifecycle, None, redis_settings=lifecycle)
    try:
        for _ in range(3):
            await run(pool, lifecycle, oracle)
        report = await reconcile_chain(pool, lifecycle, oracle, CHAIN, from_block=0)
    finally:
        await oracle.aclose()
        await world.oracle.aclose()

    assert await balance(pool, account.id) == Decimal(2)  # only the later transfer
    assert [r["transfer_id"] for r in await deposits(pool)] == [late_id]
    refuted = await pool.fetch(
        "SELECT tx_hash, status, reason FROM chain_deposit_reports WHERE to_address = $1"
        " AND source = 'webhook' ORDER BY tx_hash = $2 DESC",
        address,
        early,
    )
    assert refuted[0]["status"] == "refuted"
    assert refuted[0]["reason"].startswith("not creditable: before_assignment")
    assert refuted[1]["status"] == "confirmed"
    assert report.clean, report.summary()
    assert f"{early_id} (before_assignment)" in report.not_creditable
    assert early_id not in report.uncredited and late_id not in report.uncredited


async def test_a_token_deposit_reversed_twice_and_mined_twice_is_credited_once_each_time(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    database_url: str,
    migration_url: str,
    redis: Redis,
) -> None:
    """25 USDC credited, reversed by a deep reorg, mined again (credited `~1`), reversed
    again (`reorg:…~1`), then mined a second time in a block where another transfer of
    the token comes first, so its block-level log index differs: credited `~2`, once."""
    settings = chain_settings(
        database_url, migration_url, anvil.url, eth_confirmation_policy="confirmations:1"
    )
    token = await anvil.deploy_token("Test USD Coin", "USDC", 6)
    await register_token(owner_pool, token)
    await anvil.token_mint(token, DEFAULT_ACCOUNTS[0], 10 * USDC_25)
    await anvil.token_mint(token, DEFAULT_ACCOUNTS[1], 10 * USDC_25)
    account, address = await open_account(pool, settings, "USDC")
    await anvil.mine(2)
    tx = await anvil.token_transfer(token, address, USDC_25)
    raw = await anvil.rpc.call("eth_getRawTransactionByHash", tx)
    await deliver(pool, settings, generic_event(address, "25", tx, "USDC", token))
    tid = transfer_id(CHAIN, tx, 0)
    oracle = FinalityOracle(settings, redis, redis_settings=settings)

    async def settle(passes: int = 4) -> tuple[int, int, int]:
        runs = [await run(pool, settings, oracle) for _ in range(passes)]
        return (
            sum(r.credited for r in runs),
            sum(r.reversed for r in runs),
            sum(r.reincluded for r in runs),
        )

    try:
        await anvil.mine(1)
        assert await settle() == (1, 0, 0)
        await anvil.reorg(3)
        assert await settle() == (0, 1, 0)
        if await anvil.rpc.get_receipt(tx) is None:
            await anvil.rpc.send_raw_transaction(raw)
        await anvil.mine(2)
        first_index = (await anvil.receipt(tx))["logs"][0]["logIndex"]
        assert await settle() == (1, 0, 1)

        await anvil.reorg(3)  # gone again
        assert await anvil.rpc.get_receipt(tx) is None
        assert await settle() == (0, 1, 0)
        assert await balance(pool, account) == 0
        # back once more, behind another transfer of the token in the same block
        other = {
            "from": DEFAULT_ACCOUNTS[1],
            "to": token,
            "data": encode_call(
                "transfer(address,uint256)", ["address", "uint256"], [DEFAULT_ACCOUNTS[7], 1]
            ),
        }
        await anvil.reorg(1, [(other, 0), (raw, 0)])
        await anvil.mine(2)
        receipt = await anvil.receipt(tx)
        assert receipt["logs"][0]["logIndex"] != first_index
        assert await settle() == (1, 0, 1)
        assert await settle() == (0, 0, 0)  # and nothing more
    finally:
        await oracle.aclose()
    assert await balance(pool, account) == Decimal(25)
    assert await ledger(pool, account) == [
        (f"chain:{tid}", "deposit", Decimal(25)),
        (f"reorg:{tid}", "deposit_reversal", Decimal(-25)),
        (f"chain:{tid}~1", "deposit", Decimal(25)),
        (f"reorg:{tid}~1", "deposit_reversal", Decimal(-25)),
        (f"chain:{tid}~2", "deposit", Decimal(25)),
    ]
    [deposit] = await deposits(pool)
    assert (deposit["status"], deposit["position"]) == ("credited", 0)
    assert deposit["past_credit_events"] == [f"chain:{tid}", f"chain:{tid}~1"]
    assert deposit["block_hash"] == receipt["blockHash"]
