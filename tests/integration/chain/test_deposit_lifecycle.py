"""The deposit lifecycle on a real node (anvil, `finalized` = head - 2): reports are
verified against the chain, credited once when final through `post_event`, orphaned
by a reorg before finality, re-included once, and wrong reports kept for review."""

# ruff: noqa: F811 - the fixtures imported from deposit_support are parameters here
from __future__ import annotations

from decimal import Decimal

import asyncpg

from payflow.chain.deposits import observe
from payflow.chain.finality import FinalityOracle
from payflow.chain.rpc import hex_int
from payflow.chain.transfers import Transfer
from payflow.chain.verify import Truth, verify_claim
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ingress.service import IngressResult
from payflow_lab.anvil import DEFAULT_ACCOUNTS, WEI_PER_ETH, AnvilNode
from tests.integration.ingress.alchemy import token_activity, webhook

from .deposit_support import (  # noqa: F401 (fixtures)
    CHAIN,
    balance,
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


async def test_a_deposit_is_credited_once_only_after_finality(
    anvil: AnvilNode, pool: asyncpg.Pool, settings: Settings, oracle: FinalityOracle
) -> None:
    account, address = await open_account(pool, settings, "ETH")
    tx = await anvil.send_eth(address, 3 * WEI_PER_ETH // 2)
    [landed] = await deliver(pool, settings, generic_event(address, "1.5", tx, "ETH", None))
    assert landed.result is IngressResult.RECORDED
    assert await pending(pool, account) == Decimal("1.5")  # reported, not yet verified

    first = await run(pool, settings, oracle)
    assert (first.confirmed, first.credited) == (1, 0)
    [deposit] = await deposits(pool)
    receipt = await anvil.receipt(tx)
    assert (deposit["status"], deposit["block_number"], deposit["block_hash"]) == (
        "verified",
        hex_int(receipt["blockNumber"]),
        receipt["blockHash"],
    )
    assert deposit["transfer_id"] == f"{CHAIN}:{tx}:-1"
    assert await balance(pool, account) == 0
    assert await pending(pool, account) == Decimal("1.5")

    await anvil.mine(2)
    second = await run(pool, settings, oracle)
    assert second.credited == 1
    assert await balance(pool, account) == Decimal("1.5")
    assert await pending(pool, account) == 0
    assert await ledger(pool, account) == [(f"chain:{CHAIN}:{tx}:-1", "deposit", Decimal("1.5"))]

    # more passes, a redelivery and the scanner's report change nothing
    await deliver(pool, settings, generic_event(address, "1.5", tx, "ETH", None))
    async with pool.acquire() as conn, transaction(conn, settings):
        await observe(
            conn,
            Transfer(CHAIN, tx, -1, address, None, 3 * WEI_PER_ETH // 2),
            source="scanner",
            trace_id="scan",
            seen_in_block=(deposit["block_number"], deposit["block_hash"]),
        )
    await anvil.mine(3)
    await run(pool, settings, oracle)
    await run(pool, settings, oracle)
    assert len(await ledger(pool, account)) == 1
    assert await balance(pool, account) == Decimal("1.5")
    [deposit] = await deposits(pool)
    assert deposit["status"] == "credited" and set(deposit["sources"]) == {"webhook", "scanner"}


async def test_a_reorg_before_finality_orphans_and_never_credits(
    anvil: AnvilNode, pool: asyncpg.Pool, settings: Settings, oracle: FinalityOracle
) -> None:
    account, address = await open_account(pool, settings, "ETH")
    tx = await anvil.send_eth(address, WEI_PER_ETH)
    await deliver(pool, settings, generic_event(address, "1", tx, "ETH", None))
    assert (await run(pool, settings, oracle)).confirmed == 1

    await anvil.reorg(1)  # the block with the transfer is replaced; the tx is gone
    await pool.execute("UPDATE chain_deposits SET next_check_at = now() + interval '1 hour'")
    assert (await run(pool, settings, oracle)).orphaned == 0  # not due yet
    # Alchemy's `removed: true` notice brings the transaction forward: checked now
    notice = token_activity(address, 1, tx_hash=tx, removed=True)
    [kept] = await deliver(pool, settings, webhook(notice))
    assert kept.reason is not None and kept.reason.value == "removed"
    assert (await run(pool, settings, oracle)).orphaned == 1
    await anvil.mine(5)
    await run(pool, settings, oracle)
    [deposit] = await deposits(pool)
    assert deposit["status"] == "orphaned" and deposit["credit_event_id"] is None
    assert await balance(pool, account) == 0
    assert await pending(pool, account) == 0
    assert await ledger(pool, account) == []


async def test_a_transaction_re_included_in_another_block_is_credited_once(
    anvil: AnvilNode, pool: asyncpg.Pool, settings: Settings, oracle: FinalityOracle
) -> None:
    account, address = await open_account(pool, settings, "ETH")
    await anvil.mine(3)
    tx = await anvil.send_eth(address, 2 * WEI_PER_ETH)
    await deliver(pool, settings, generic_event(address, "2", tx, "ETH", None))
    await run(pool, settings, oracle)
    [before] = await deposits(pool)

    # The same signed transaction, mined again in the replacing chain one block later.
    raw = await anvil.rpc.call("eth_getRawTransactionByHash", tx)
    await anvil.reorg(1, [(raw, 0)])
    moved = await anvil.receipt(tx)
    assert moved["blockHash"] != before["block_hash"]
    await run(pool, settings, oracle)
    [after] = await deposits(pool)
    assert (after["status"], after["block_hash"]) == ("verified", moved["blockHash"])

    await anvil.mine(3)
    await run(pool, settings, oracle)
    await run(pool, settings, oracle)
    assert await balance(pool, account) == Decimal("2")
    assert await ledger(pool, account) == [(f"chain:{CHAIN}:{tx}:-1", "deposit", Decimal("2"))]


async def test_webhook_alchemy_and_scanner_reports_of_one_token_transfer_credit_once(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    oracle: FinalityOracle,
) -> None:
    token = await anvil.deploy_token(decimals=6)
    await register_token(owner_pool, token)
    account, address = await open_account(pool, settings, "USDC")
    await anvil.token_mint(token, DEFAULT_ACCOUNTS[0], 10_000_000)
    other = "0x" + "42" * 20
    # two Transfer logs in one transaction: ours is at position 1 inside it
    tx = await anvil.token_batch_transfer(token, [(other, 5), (address, 1_000_001)])
    receipt = await anvil.receipt(tx)
    block_log_index = hex_int(receipt["logs"][1]["logIndex"])
    assert block_log_index is not None

    generic = generic_event(address, "1.000001", tx, "USDC", token)
    activity = token_activity(address, 1_000_001, tx_hash=tx, log_index=block_log_index)
    activity["rawContract"]["address"] = activity["log"]["address"] = token
    await deliver(pool, settings, generic)
    await deliver(pool, settings, webhook(activity))
    async with pool.acquire() as conn, transaction(conn, settings):
        await observe(
            conn,
            Transfer(CHAIN, tx, 1, address, token, 1_000_001),
            source="scanner",
            trace_id="scan",
            seen_in_block=(hex_int(receipt["blockNumber"]) or 0, receipt["blockHash"]),
        )
    assert await pending(pool, account) == Decimal("1.000001")
    await anvil.mine(2)
    await run(pool, settings, oracle)
    await run(pool, settings, oracle)

    [deposit] = await deposits(pool)
    assert deposit["transfer_id"] == f"{CHAIN}:{tx}:1"
    assert set(deposit["sources"]) == {"webhook", "alchemy", "scanner"}
    assert await balance(pool, account) == Decimal("1.000001")  # 6 decimals, exact
    assert len(await ledger(pool, account)) == 1
    statuses = await pool.fetch("SELECT source, status FROM chain_deposit_reports ORDER BY source")
    assert [(r["source"], r["status"]) for r in statuses] == [
        ("alchemy", "confirmed"),
        ("scanner", "confirmed"),
        ("webhook", "confirmed"),
    ]


async def test_wrong_reports_are_kept_for_review_and_never_taint_the_real_transfer(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    oracle: FinalityOracle,
) -> None:
    token = await anvil.deploy_token(decimals=6)
    lookalike = await anvil.deploy_token("Test USD Coin", "USDC", 6)  # never registered
    await register_token(owner_pool, token)
    account, address = await open_account(pool, settings, "USDC")
    for contract in (token, lookalike):
        await anvil.token_mint(contract, DEFAULT_ACCOUNTS[0], 10_000_000)
    real = await anvil.token_transfer(token, address, 2_500_000)
    fake = await anvil.token_transfer(lookalike, address, 7_000_000)
    await anvil.mine(3)

    await deliver(pool, settings, generic_event(address, "99", real, "USDC", token))
    await deliver(pool, settings, generic_event(address, "5", "0x" + "ab" * 32, "USDC", token))
    await deliver(pool, settings, generic_event(address, "7", fake, "USDC", token))
    assert (await run(pool, settings, oracle)).refuted == 3
    assert await deposits(pool) == []
    assert await pending(pool, account) == 0
    refuted = await pool.fetch(
        "SELECT tx_hash, reason FROM chain_deposit_reports WHERE status = 'refuted'"
    )
    reasons = {r["tx_hash"]: r["reason"] for r in refuted}
    assert reasons[real].startswith("another amount")
    assert reasons["0x" + "ab" * 32] == "no such transaction on the chain"
    assert reasons[fake].startswith("another contract")

    # the real transfer, reported correctly, still credits (the wrong report stays refuted)
    await deliver(pool, settings, generic_event(address, "2.5", real, "USDC", token))
    await run(pool, settings, oracle)
    await run(pool, settings, oracle)
    assert await balance(pool, account) == Decimal("2.5")
    [deposit] = await deposits(pool)
    assert (deposit["status"], deposit["units"]) == ("credited", Decimal(2_500_000))
    assert (
        await pool.fetchval("SELECT count(*) FROM chain_deposit_reports WHERE status = 'refuted'")
        == 3
    )


async def test_a_warm_cache_verification_of_a_final_block_costs_no_rpc_call(
    anvil: AnvilNode, pool: asyncpg.Pool, settings: Settings, oracle: FinalityOracle
) -> None:
    account, address = await open_account(pool, settings, "ETH")
    tx = await anvil.send_eth(address, WEI_PER_ETH)
    await anvil.mine(3)
    warm = settings.model_copy(update={"chain_cache_recent_ttl_s": 60.0})
    cached = FinalityOracle(warm, oracle.redis, redis_settings=warm)
    try:
        first = await verify_claim(
            cached, CHAIN, tx, to_address=address, contract=None, units=WEI_PER_ETH, position=-1
        )
        assert isinstance(first, Truth)
        assert await cached.is_final(CHAIN, first.block_number, first.block_hash) is True
        calls = cached.rpc_calls
        again = await verify_claim(
            cached, CHAIN, tx, to_address=address, contract=None, units=WEI_PER_ETH, position=-1
        )
        assert again == first
        assert await cached.is_final(CHAIN, first.block_number, first.block_hash) is True
        assert cached.rpc_calls == calls > 0
    finally:
        await cached.aclose()
    assert await balance(pool, account) == 0  # verifying is not crediting
