"""Treasury addresses on a real anvil: registered checked and audited; a token sweep from
a deposit address to one is booked custody -> treasury once, balanced; an outflow to any
other address is a mismatch whose alert names the transaction; the job alerts on it."""

from __future__ import annotations

from decimal import Decimal

import asyncpg
import pytest
from eth_utils.address import to_checksum_address
from redis.asyncio import Redis

from payflow.alerts import Severity
from payflow.chain.custody import CustodyLine, CustodyReport, reconcile_custody
from payflow.chain.finality import FinalityOracle
from payflow.chain.jobs import recon_chain_job
from payflow.chain.recon_cli import run_chain_recon
from payflow.chain.treasury import add_treasury, list_treasury, remove_treasury
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ingress.service import assign_address
from payflow.jobs.spec import JobContext
from payflow.ledger.accounts import create_account
from payflow_lab.anvil import DEFAULT_ACCOUNTS, WEI_PER_ETH, AnvilNode
from tests.recording_alerts import RecordingSink

from .deposit_support import (
    CHAIN,
    deliver,
    generic_event,
    new_address,
    oracle,
    redis,
    register_token,
    run,
    settings,
)

__all__ = ["oracle", "redis", "settings"]  # fixtures


def _usdc(report: CustodyReport) -> CustodyLine:
    [line] = [line for line in report.lines if line.asset == "USDC"]
    return line


async def test_treasury_addresses_are_checked_and_audited(
    anvil: AnvilNode, pool: asyncpg.Pool, settings: Settings
) -> None:
    good = to_checksum_address(DEFAULT_ACCOUNTS[2])
    typo = good[:2] + good[2:].swapcase()  # mixed case that is not the checksum form
    with pytest.raises(ValueError, match="EIP-55"):
        await add_treasury(settings.database, CHAIN, typo, "ops@test")
    with pytest.raises(ValueError, match="zero address"):
        await add_treasury(settings.database, CHAIN, "0x" + "0" * 40, "ops@test")
    with pytest.raises(ValueError, match="unknown chain"):
        await add_treasury(settings.database, "NOPE_CHAIN", good, "ops@test")
    assert await add_treasury(settings.database, CHAIN, good, "ops@test") == (good.lower(), True)
    assert await add_treasury(settings.database, CHAIN, good.lower(), "ops@test") == (
        good.lower(),
        False,
    )
    assert await remove_treasury(settings.database, CHAIN, good, "lead@test") is True
    assert await remove_treasury(settings.database, CHAIN, good, "lead@test") is False
    [row] = await list_treasury(settings.database)
    assert (row["address"], row["added_by"], row["removed_by"]) == (
        good.lower(),
        "ops@test",
        "lead@test",
    )
    assert row["added_at"] <= row["removed_at"]


async def test_a_sweep_to_treasury_is_booked_and_an_outflow_elsewhere_alerts(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    oracle: FinalityOracle,
    redis: Redis,
) -> None:
    token = await anvil.deploy_token(decimals=6)
    await register_token(owner_pool, token)
    address, vault = DEFAULT_ACCOUNTS[3].lower(), DEFAULT_ACCOUNTS[2]
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "USDC")
        await assign_address(conn, CHAIN, address, account.id)
    await add_treasury(settings.database, CHAIN, vault, "ops@test")
    await anvil.token_mint(token, DEFAULT_ACCOUNTS[0], 10_000_000)
    deposit = await anvil.token_transfer(token, address, 10_000_000)
    await deliver(pool, settings, generic_event(address, "10", deposit, "USDC", token))
    await anvil.mine(3)
    await run(pool, settings, oracle)
    await run(pool, settings, oracle)
    first = await reconcile_custody(pool, settings, oracle, CHAIN, from_block=0)
    assert _usdc(first).clean
    # the deposit address is an anvil account: its prefunded ETH is on no book (a mismatch)
    [eth] = [line for line in first.lines if line.asset == "ETH"]
    assert eth.books == 0 and eth.on_chain > 0 and not eth.clean

    sweep = await anvil.token_transfer(token, vault, 6_000_000, sender=DEFAULT_ACCOUNTS[3])
    await anvil.mine(3)
    report = await reconcile_custody(pool, settings, oracle, CHAIN, from_block=0)
    assert report.booked_movements[0] == f"treasury_sweep {sweep}:0 6 USDC"
    # the deposit address paid the owners' transaction's gas: custody -> network_fees
    assert [m.split(" ")[:2] for m in report.booked_movements[1:]] == [
        ["sweep_gas", f"{sweep}:gas"]
    ]
    usdc = _usdc(report)
    assert (usdc.books, usdc.on_chain, usdc.difference) == (Decimal(4), Decimal(4), 0)
    assert usdc.clean and report.unexplained_outflows == []
    legs = await pool.fetch(
        "SELECT l.ledger_account, l.amount FROM ledger_legs l"
        " JOIN ledger_transfers t ON t.id = l.transfer_id WHERE t.kind = 'treasury_sweep'"
        " ORDER BY l.amount"
    )
    assert [(r["ledger_account"], r["amount"]) for r in legs] == [  # balanced
        (f"treasury:{CHAIN}:USDC", Decimal(-6)),
        (f"custody:{CHAIN}:USDC", Decimal(6)),
    ]
    again = await reconcile_custody(pool, settings, oracle, CHAIN, from_block=0)
    assert again.booked_movements == [] and _usdc(again).clean  # once per tx and log index

    stranger = new_address()
    leak = await anvil.token_transfer(token, stranger, 1_000_000, sender=DEFAULT_ACCOUNTS[3])
    await anvil.mine(3)
    dirty = await reconcile_custody(pool, settings, oracle, CHAIN, from_block=0)
    assert dirty.unexplained_outflows == [f"{leak}:0 from {address} to {stranger} 1 USDC"]
    usdc = _usdc(dirty)
    assert usdc.difference == Decimal(-1) and not dirty.clean
    assert any(leak in why for why in usdc.explanations)

    sink = RecordingSink()
    job_settings = settings.model_copy(update={"recon_chain_window_blocks": 10_000})
    result = await recon_chain_job(JobContext(pool, job_settings, sink, redis))
    assert result.outcome == "alert"
    fired = {key: (severity, message) for key, severity, message, _ in sink.fired}
    assert fired[f"recon.custody_outflow:{leak}:0"][0] is Severity.CRITICAL
    assert leak in fired[f"recon.custody_outflow:{leak}:0"][1]
    severity, message = fired[f"recon.custody:{CHAIN}:USDC"]
    assert severity is Severity.CRITICAL and "differs from the chain by -1" in message
    assert (
        await run_chain_recon(settings, from_block=0, database=settings, redis_settings=settings)
        is False
    )  # the command exits 1


async def test_native_funding_sweep_and_gas_are_booked_and_a_native_leak_is_a_mismatch(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    settings: Settings,
    oracle: FinalityOracle,
) -> None:
    address, vault = DEFAULT_ACCOUNTS[3].lower(), DEFAULT_ACCOUNTS[2].lower()
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "ETH")
        await assign_address(conn, CHAIN, address, account.id)
    await add_treasury(settings.database, CHAIN, vault, "ops@test")
    await anvil.set_balance(address, 0)  # anvil prefunds it: start from nothing
    await anvil.mine(3)
    start = await anvil.head()
    funding = await anvil.send_eth(address, 2 * WEI_PER_ETH, sender=DEFAULT_ACCOUNTS[2])
    sweep = await anvil.send_eth(vault, WEI_PER_ETH, sender=DEFAULT_ACCOUNTS[3])
    await anvil.mine(3)
    report = await reconcile_custody(pool, settings, oracle, CHAIN, from_block=start)
    booked = sorted(m.split(" ")[:2] for m in report.booked_movements)
    assert booked == sorted(
        [
            ["treasury_funding", f"{funding}:-1"],
            ["treasury_sweep", f"{sweep}:-1"],
            ["sweep_gas", f"{sweep}:gas"],
        ]
    )
    eth = _eth(report)
    assert eth.clean, eth.summary()
    assert 0 < eth.on_chain < 1  # 2 in, 1 out, the sweep's gas
    assert report.unexplained_outflows == []

    stranger = new_address()
    leak = await anvil.send_eth(stranger, WEI_PER_ETH // 10, sender=DEFAULT_ACCOUNTS[3])
    await anvil.mine(3)
    dirty = await reconcile_custody(pool, settings, oracle, CHAIN, from_block=start)
    assert dirty.unexplained_outflows == [f"{leak}:-1 from {address} to {stranger} 0.1 ETH"]
    assert dirty.booked_movements == [
        f"sweep_gas {leak}:gas {dirty.booked_movements[0].split(' ')[2]} ETH"
    ]
    assert _eth(dirty).difference == Decimal("-0.1") and not dirty.clean


def _eth(report: CustodyReport) -> CustodyLine:
    [line] = [line for line in report.lines if line.asset == "ETH"]
    return line
