"""A payout is settled on the chain's word alone, never pays more fee than it held,
refuses known sinks, reads ages from one clock, and every stall alerts and can be
resolved by an audited operator action. All on real anvil and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pydantic import SecretStr

from payflow.alerts import Severity
from payflow.chain.payouts.actions import ActionRefused, resign_payout, void_payout
from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.holds import PayoutRefused
from payflow.chain.payouts.signer import HotWallet, TxFees
from payflow.chain.payouts.wallet import stalled_counts
from payflow.chain.rpc import RpcClient, to_hex
from payflow.config import Settings
from payflow.ops.status import collect_status
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
from tests.integration.payouts.tip_floor import tip_floor_node
from tests.recording_alerts import RecordingSink

GWEI = 10**9


async def _quirk_token(
    anvil: AnvilNode, owner_pool: asyncpg.Pool, engine: PayoutEngine, *, silent: bool
) -> str:
    token = await anvil.deploy_quirk_token(silent=silent)
    await owner_pool.execute(
        "INSERT INTO chain_tokens (chain, contract, asset, decimals) VALUES ($1, $2, 'USDC', 6)",
        CHAIN,
        token,
    )
    (hot,) = engine.wallets
    await anvil.receipt(await anvil.token_mint(token, hot, 1_000 * 10**6))
    await anvil.set_balance(hot, 10 * WEI)
    return token


async def _status(pool: asyncpg.Pool, payout_id: Any) -> Any:
    return await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout_id)


async def test_a_token_returning_false_is_not_confirmed(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    token = await _quirk_token(anvil, owner_pool, engine, silent=False)
    settings = payout_settings.model_copy(update={"payout_token_fee": Decimal("0.5")})
    engine.settings = settings
    account = await funded_account(owner_pool, "USDC", Decimal("100"))
    to = fresh_address()
    await anvil.receipt(await anvil.token_set_blocked(token, to, True))
    payout = await request_payout(pool, settings, account, "10", to)

    await settle_all(engine, anvil)

    row = await _status(pool, payout["id"])
    assert row["status"] == "failed" and row["receipt_status"] == 1
    assert "without moving the funds" in row["failure"]
    assert await anvil.token_balance(token, to) == 0
    rows = await ledger_rows(pool, account)
    assert [(r["event_type"], r["amount"]) for r in rows] == [("withdrawal_fee", Decimal("-0.5"))]
    acct = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    assert (acct["balance"], acct["held"]) == (Decimal("99.5"), Decimal(0))


async def test_a_token_returning_nothing_still_pays(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    token = await _quirk_token(anvil, owner_pool, engine, silent=True)
    settings = payout_settings.model_copy(update={"payout_token_fee": Decimal("0.5")})
    engine.settings = settings
    account = await funded_account(owner_pool, "USDC", Decimal("100"))
    to = fresh_address()
    payout = await request_payout(pool, settings, account, "10", to)

    await settle_all(engine, anvil)

    assert (await _status(pool, payout["id"]))["status"] == "confirmed"
    assert await anvil.token_balance(token, to) == 10 * 10**6
    acct = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    assert (acct["balance"], acct["held"]) == (Decimal("89.5"), Decimal(0))


async def test_a_raised_fee_ceiling_never_bumps_an_older_payout_past_its_hold(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    old = payout_settings.model_copy(update={"payout_max_fee_per_gas_wei": 100 * GWEI})
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    payout = await request_payout(pool, old, account, "1", fresh_address())
    assert payout["fee_hold"] == Decimal("0.0021")
    # the operator raises the ceiling as the docs advise for stuck payouts
    engine.settings = payout_settings.model_copy(
        update={"payout_max_fee_per_gas_wei": 500 * GWEI, "payout_stuck_after_s": 0.0}
    )
    await anvil.set_automine(False)
    for _ in range(6):
        await engine.tick()
    txs = await pool.fetch(
        "SELECT gas_limit, max_fee_per_gas FROM payout_txs WHERE payout_id = $1", payout["id"]
    )
    assert len(txs) >= 2  # it was bumped, and never past the hold
    assert max(int(t["gas_limit"]) * int(t["max_fee_per_gas"]) for t in txs) <= 21_000 * 100 * GWEI
    await anvil.set_automine(True)
    await anvil.mine(1)
    await settle_all(engine, anvil)

    row = await _status(pool, payout["id"])
    assert row["status"] == "confirmed" and row["fee_paid"] <= Decimal("0.0021")
    kinds = [r["event_type"] for r in await ledger_rows(pool, account)]
    assert kinds == ["withdrawal", "withdrawal_fee"]


@pytest.mark.parametrize(
    "sink",
    ["zero", "precompile", "token", "hot_wallet", "configured_wallet", "deposit_address"],
)
async def test_known_sinks_are_refused_at_creation(
    sink: str,
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    (hot,) = engine.wallets
    if sink == "zero":
        to = "0x" + "0" * 40
    elif sink == "precompile":
        to = "0x" + "0" * 39 + "5"
    elif sink == "token":
        to = await anvil.deploy_token()
        await owner_pool.execute(
            "INSERT INTO chain_tokens (chain, contract, asset, decimals)"
            " VALUES ($1, $2, 'USDC', 6)",
            CHAIN,
            to,
        )
    elif sink == "hot_wallet":
        to = fresh_address()
        await owner_pool.execute(
            "INSERT INTO hot_wallets (chain, address, next_nonce) VALUES ($1, $2, 0)", CHAIN, to
        )
    elif sink == "configured_wallet":
        to = hot
    else:
        to = fresh_address()
        await owner_pool.execute(
            "INSERT INTO deposit_addresses (chain, address, account_id) VALUES ($1, $2, $3)",
            CHAIN,
            to,
            account,
        )
    with pytest.raises(PayoutRefused) as refused:
        await request_payout(pool, payout_settings, account, "1", to)
    assert refused.value.field == "body.to_address"
    acct = await pool.fetchrow("SELECT held FROM accounts WHERE id = $1", account)
    assert acct["held"] == 0
    assert await pool.fetchval("SELECT count(*) FROM payouts") == 0


async def test_an_application_clock_ahead_does_not_bump(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    engine.settings = payout_settings.model_copy(update={"payout_stuck_after_s": 60.0})
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    payout = await request_payout(pool, engine.settings, account, "1", fresh_address())
    await anvil.set_automine(False)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 150)  # this process's clock only
    for _ in range(3):
        await engine.tick()
    attempts = await pool.fetchval(
        "SELECT count(*) FROM payout_txs WHERE payout_id = $1", payout["id"]
    )
    assert attempts == 1


async def _take_the_nonce(anvil: AnvilNode, engine: PayoutEngine, hot_key: str) -> None:
    """Another signer with the same key replaces our pending transaction and mines."""
    (hot,) = engine.wallets
    other = HotWallet(SecretStr(hot_key))
    signed = other.sign(
        chain_id=await engine.chain_id(),
        nonce=0,
        to=hot,
        value=0,
        data="0x",
        fees=TxFees(21_000, 300 * GWEI, 50 * GWEI),
    )
    await anvil.rpc.call("eth_sendRawTransaction", signed.raw)
    await anvil.set_automine(True)
    await anvil.mine(3)


@pytest.mark.parametrize("resolution", ["void", "resign"])
async def test_a_nonce_taken_by_another_signer_alerts_and_is_resolved(
    resolution: str,
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    hot_key: str,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    to = fresh_address()
    payout = await request_payout(pool, payout_settings, account, "1", to)
    await anvil.set_automine(False)
    await engine.tick()  # signed at nonce 0, pending
    with pytest.raises(ActionRefused, match="may still be mined"):
        await void_payout(engine, payout["id"], actor="ops", reason="too early")
    await _take_the_nonce(anvil, engine, hot_key)
    engine.alerts = sink = RecordingSink()
    await engine.tick()

    row = await _status(pool, payout["id"])
    assert (row["status"], row["stall"]) == ("sent", "nonce_taken")
    stalled = [f for f in sink.fired if f[0] == "payouts.stalled"]
    assert stalled and stalled[-1][1] is Severity.CRITICAL
    assert str(payout["id"]) in stalled[-1][3]["nonce_taken"]
    async with pool.acquire() as conn:
        assert await stalled_counts(conn, 3600.0) == {"nonce_taken": 1}
    status = await collect_status(pool, payout_settings)
    assert "payouts stalled: 1 nonce_taken (payflow payouts stalled)" in status.problems

    if resolution == "void":
        result = await void_payout(engine, payout["id"], actor="alice", reason="nonce reused")
        assert result.status == "failed"
        row = await _status(pool, payout["id"])
        assert row["status"] == "failed" and row["fee_paid"] == 0 and row["stall"] is None
        acct = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
        assert (acct["balance"], acct["held"]) == (Decimal("5"), Decimal(0))
        assert await ledger_rows(pool, account) == []
    else:
        result = await resign_payout(engine, payout["id"], actor="alice", reason="nonce reused")
        assert (result.old_nonce, result.new_nonce) == (0, 1)
        await settle_all(engine, anvil)
        row = await _status(pool, payout["id"])
        assert (row["status"], row["nonce"]) == ("confirmed", 1)
        assert await anvil.rpc.get_balance(to) == WEI
        kinds = [r["event_type"] for r in await ledger_rows(pool, account)]
        assert kinds == ["withdrawal", "withdrawal_fee"]
    audit = await pool.fetch("SELECT * FROM payout_actions WHERE payout_id = $1", payout["id"])
    assert [(a["action"], a["actor"], a["reason"]) for a in audit] == [
        (resolution, "alice", "nonce reused")
    ]
    assert audit[0]["old_nonce"] == 0
    await engine.tick()
    async with pool.acquire() as conn:
        assert await stalled_counts(conn, 3600.0) == {}
    status = await collect_status(pool, payout_settings)
    assert not [p for p in status.problems if p.startswith("payouts stalled")]


async def test_a_broadcast_the_node_refuses_alerts_and_recovers(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    settings = payout_settings.model_copy(update={"payout_max_fee_per_gas_wei": 20 * GWEI})
    engine.settings = settings
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    payout = await request_payout(pool, settings, account, "1", fresh_address())
    # the chain's base fee rises above the payout's ceiling: every broadcast is refused
    await anvil.rpc.call("anvil_setNextBlockBaseFeePerGas", to_hex(50 * GWEI))
    await anvil.mine(1)
    engine.alerts = sink = RecordingSink()
    await engine.tick()
    await engine.tick()

    row = await _status(pool, payout["id"])
    assert (row["status"], row["stall"]) == ("signed", "unaccepted")
    assert "base fee" in row["stall_detail"]
    assert "payouts.stalled" in sink.keys()
    async with pool.acquire() as conn:
        assert await stalled_counts(conn, 3600.0) == {"unaccepted": 1}
    txs = await pool.fetch(
        "SELECT gas_limit, max_fee_per_gas FROM payout_txs WHERE payout_id = $1", payout["id"]
    )
    assert all(int(t["max_fee_per_gas"]) <= 20 * GWEI for t in txs)

    await anvil.rpc.call("anvil_setNextBlockBaseFeePerGas", to_hex(GWEI))
    await anvil.mine(2)
    await settle_all(engine, anvil)
    row = await _status(pool, payout["id"])
    assert (row["status"], row["stall"]) == ("confirmed", None)
    assert sink.resolved[-1] in ("payouts.stalled", "payouts.stuck")


async def test_a_node_with_a_tip_floor_gets_a_bumped_payout(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    hot_key: str,
) -> None:
    """The node refuses the first broadcast as underpriced (its minimum tip is above
    PAYOUT_PRIORITY_FEE_WEI): the payout is bumped at once, within its hold, and pays."""
    settings = payout_settings.model_copy(update={"payout_priority_fee_wei": GWEI})
    wallet = HotWallet(SecretStr(hot_key))
    await anvil.set_balance(wallet.address, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    to = fresh_address()
    payout = await request_payout(pool, settings, account, "1", to)
    async with (
        tip_floor_node(anvil.url, 2 * GWEI) as (url, refused),
        RpcClient(url, chain=CHAIN) as rpc,
    ):
        engine = PayoutEngine(
            pool,
            settings,
            rpc,
            [wallet],
            alerts=RecordingSink(),
            database=settings,
            chains=settings,
        )
        await engine.tick()
        assert refused  # the first attempt was refused for its tip
        await settle_all(engine, anvil)

    row = await _status(pool, payout["id"])
    assert (row["status"], row["stall"]) == ("confirmed", None)
    assert await anvil.rpc.get_balance(to) == WEI
    txs = await pool.fetch(
        "SELECT max_fee_per_gas, max_priority_fee_per_gas FROM payout_txs"
        " WHERE payout_id = $1 ORDER BY attempt",
        payout["id"],
    )
    assert len(txs) >= 2 and int(txs[-1]["max_priority_fee_per_gas"]) >= 2 * GWEI
    assert all(int(t["max_fee_per_gas"]) <= 100 * GWEI for t in txs)


async def test_a_tip_floor_above_the_hold_stalls_and_alerts(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    hot_key: str,
) -> None:
    """A floor no bump within the hold can reach: the payout stays signed, marked
    `unaccepted` with the node's words, and `payouts.stalled` fires."""
    wallet = HotWallet(SecretStr(hot_key))
    await anvil.set_balance(wallet.address, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    payout = await request_payout(pool, payout_settings, account, "1", fresh_address())
    async with (
        tip_floor_node(anvil.url, 200 * GWEI) as (url, _refused),
        RpcClient(url, chain=CHAIN) as rpc,
    ):
        engine = PayoutEngine(
            pool,
            payout_settings,
            rpc,
            [wallet],
            alerts=RecordingSink(),
            database=payout_settings,
            chains=payout_settings,
        )
        await engine.tick()
        await engine.tick()
    row = await _status(pool, payout["id"])
    assert (row["status"], row["stall"]) == ("signed", "unaccepted")
    assert "underpriced" in row["stall_detail"]
    assert isinstance(engine.alerts, RecordingSink)
    assert "payouts.stalled" in engine.alerts.keys()


async def test_a_nonce_another_signer_already_used_is_skipped(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    hot_key: str,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    first = await request_payout(pool, payout_settings, account, "1", fresh_address())
    await settle_all(engine, anvil)
    other = HotWallet(SecretStr(hot_key)).sign(
        chain_id=await engine.chain_id(),
        nonce=1,
        to=hot,
        value=0,
        data="0x",
        fees=TxFees(21_000, 100 * GWEI, GWEI),
    )
    await anvil.receipt(await anvil.rpc.call("eth_sendRawTransaction", other.raw))
    second = await request_payout(pool, payout_settings, account, "1", fresh_address())
    await settle_all(engine, anvil)

    rows = await pool.fetch(
        "SELECT id, status, nonce FROM payouts WHERE id = ANY($1::uuid[]) ORDER BY nonce",
        [first["id"], second["id"]],
    )
    assert [(r["status"], r["nonce"]) for r in rows] == [("confirmed", 0), ("confirmed", 2)]


async def _cli(settings: Settings, hot_key: str, *args: str) -> tuple[int, str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": settings.database_url,
        "PAYOUT_CHAIN": settings.payout_chain,
        "EVM_CHAINS": json.dumps(settings.evm_chains),
        "ETH_HOT_WALLET_KEY": hot_key,
        "LOG_LEVEL": "WARNING",
        "COLUMNS": "300",
    }
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "payflow"),
        "payouts",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_cli_lists_refuses_and_voids_a_stalled_payout(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    hot_key: str,
) -> None:
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    payout = await request_payout(pool, payout_settings, account, "1", fresh_address())
    pid = str(payout["id"])
    await anvil.set_automine(False)
    await engine.tick()
    code, _out, err = await _cli(
        payout_settings, hot_key, "void", pid, "--reason", "x", "--by", "a"
    )
    assert code == 1 and "may still be mined" in err and err.count("\n") == 1
    await _take_the_nonce(anvil, engine, hot_key)
    await engine.tick()

    code, out, _err = await _cli(payout_settings, hot_key, "stalled")
    assert code == 0
    [listed] = json.loads(out)
    assert (listed["payout_id"], listed["stall"], listed["nonce"]) == (pid, "nonce_taken", 0)
    code, _out, err = await _cli(payout_settings, hot_key, "void", pid, "--by", "bob")
    assert code == 2 and "--reason" in err
    code, out, err = await _cli(
        payout_settings, hot_key, "void", pid, "--reason", "wallet app reused it", "--by", "bob"
    )
    assert code == 0, err
    # the JSON follows the command's own log line (payflow.payouts.voided)
    assert json.loads(out[out.index("\n{") :])["status"] == "failed"
    audit = await pool.fetchrow("SELECT * FROM payout_actions WHERE payout_id = $1", payout["id"])
    assert (audit["action"], audit["actor"], audit["reason"]) == (
        "void",
        "bob",
        "wallet app reused it",
    )
    acct = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    assert (acct["balance"], acct["held"]) == (Decimal("5"), Decimal(0))


async def test_a_payout_already_bumped_past_its_hold_still_settles_once(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    hot_key: str,
) -> None:
    """An attempt signed before the cap existed paid 0.00279 ETH against 0.0021 held: the
    payout is confirmed, the amount debited, the fee charged at the hold (never refused
    on every run while the money has left)."""
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    to = fresh_address()
    payout = await request_payout(pool, payout_settings, account, "1", to)
    await anvil.set_automine(False)
    await engine.tick()
    row = await _status(pool, payout["id"])
    fees = TxFees(21_000, 133 * GWEI, 133 * GWEI)
    over = HotWallet(SecretStr(hot_key)).sign(
        chain_id=await engine.chain_id(), nonce=0, to=to, value=WEI, data="0x", fees=fees
    )
    await owner_pool.execute(
        "INSERT INTO payout_txs (payout_id, attempt, chain, hot_wallet, nonce, tx_hash, raw_tx,"
        " gas_limit, max_fee_per_gas, max_priority_fee_per_gas)"
        " VALUES ($1, 2, $2, $3, 0, $4, $5, 21000, $6, $6)",
        payout["id"],
        CHAIN,
        row["hot_wallet"],
        over.tx_hash,
        over.raw,
        133 * GWEI,
    )
    await anvil.rpc.call("eth_sendRawTransaction", over.raw)
    await anvil.set_automine(True)
    await anvil.mine(1)
    receipt = await anvil.receipt(over.tx_hash)
    assert int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16) > 2_100_000 * GWEI
    await settle_all(engine, anvil)

    row = await _status(pool, payout["id"])
    assert (row["status"], row["fee_paid"]) == ("confirmed", Decimal("0.0021"))
    rows = await ledger_rows(pool, account)
    assert [(r["event_type"], r["amount"]) for r in rows] == [
        ("withdrawal", Decimal("-1")),
        ("withdrawal_fee", Decimal("-0.0021")),
    ]
    acct = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    assert (acct["balance"], acct["held"]) == (Decimal("3.9979"), Decimal(0))
