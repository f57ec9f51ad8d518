"""A payout the fee market priced out above its hold while later nonces wait behind it is
resolved by an audited raise of its fee hold, then a re-sign at the same nonce. On real
anvil behind a node front with a minimum tip (geth's txpool floor), and PostgreSQL."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import asyncpg
import pytest
from pydantic import SecretStr

from payflow.chain.payouts.actions import ActionRefused, resign_payout, void_payout
from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.feehold import FeeHoldRefused
from payflow.chain.payouts.signer import HotWallet
from payflow.chain.rpc import RpcClient
from payflow.config import Settings
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
from tests.integration.payouts.test_proof_and_stalls import _cli
from tests.integration.payouts.tip_floor import tip_floor_node
from tests.recording_alerts import RecordingSink

GWEI = 10**9


async def _row(pool: asyncpg.Pool, payout_id: Any) -> Any:
    return await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout_id)


async def _account(pool: asyncpg.Pool, account: Any) -> tuple[Decimal, Decimal]:
    row = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    return row["balance"], row["held"]


async def test_a_priced_out_payout_with_later_nonces_pays_after_its_fee_hold_is_raised(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    hot_key: str,
) -> None:
    """The node's minimum tip (200 gwei) is above what both payouts held (100 gwei per
    gas): both stall unaccepted at nonces 0 and 1; void of the first is refused (a gap at
    0 would block 1), a raise the account cannot cover is refused with nothing changed
    (CLI: one line, exit 1), then `resign --raise-fee-hold 0.0042` pays both, each
    charged the gas it paid (above its first hold, within the raised one), audited."""
    wallet = HotWallet(SecretStr(hot_key))
    await anvil.set_balance(wallet.address, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("2.02"))
    to_first, to_second = fresh_address(), fresh_address()
    first = await request_payout(pool, payout_settings, account, "1", to_first)
    second = await request_payout(pool, payout_settings, account, "1", to_second)
    assert await _account(pool, account) == (Decimal("2.02"), Decimal("2.0042"))
    async with (
        tip_floor_node(anvil.url, 200 * GWEI) as (url, _refused),
        RpcClient(url, chain=CHAIN) as rpc,
    ):
        settings = payout_settings.model_copy(
            update={"evm_chains": {CHAIN: {"rpc_url": url, "policy": "finalized", "chain_id": 1}}}
        )
        engine = PayoutEngine(pool, settings, rpc, [wallet], alerts=RecordingSink())
        await engine.tick()
        await engine.tick()
        rows = [await _row(pool, p["id"]) for p in (first, second)]
        assert [(r["status"], r["stall"], r["nonce"]) for r in rows] == [
            ("signed", "unaccepted", 0),
            ("signed", "unaccepted", 1),
        ]
        with pytest.raises(ActionRefused, match="later payouts hold later nonces"):
            await void_payout(engine, first["id"], actor="ops", reason="priced out")

        # 2.02 - 2.0042 = 0.0158 available: a raise of 0.02 is refused, nothing changes
        attempts = await pool.fetchval("SELECT count(*) FROM payout_txs")
        code, _out, err = await _cli(
            settings,
            hot_key,
            "resign",
            str(first["id"]),
            "--raise-fee-hold",
            "0.02",
            "--reason",
            "fee market above the hold",
            "--by",
            "alice",
        )
        assert code == 1 and "does not cover" in err and err.count("\n") == 1
        with pytest.raises(FeeHoldRefused, match="more than 18 decimal places"):
            await resign_payout(
                engine, first["id"], actor="a", reason="r", raise_fee_hold="0.0000000000000000001"
            )
        assert await _account(pool, account) == (Decimal("2.02"), Decimal("2.0042"))
        assert await pool.fetchval("SELECT count(*) FROM payout_txs") == attempts
        assert await pool.fetchval("SELECT count(*) FROM payout_actions") == 0
        assert (await _row(pool, first["id"]))["fee_hold"] == Decimal("0.0021")

        code, out, err = await _cli(
            settings,
            hot_key,
            "resign",
            str(first["id"]),
            "--raise-fee-hold",
            "0.0042",
            "--reason",
            "fee market above the hold",
            "--by",
            "alice",
        )
        assert code == 0, err
        result = json.loads(out[out.index("\n{") :])
        assert (result["old_nonce"], result["new_nonce"]) == (0, 0)
        assert (result["broadcast"], result["fee_hold"]) == ("accepted", "0.0063")
        done = await resign_payout(
            engine, second["id"], actor="alice", reason="same", raise_fee_hold="0.0042"
        )
        assert (done.new_nonce, done.broadcast) == (1, "accepted")
        assert await _account(pool, account) == (Decimal("2.02"), Decimal("2.0126"))
        await settle_all(engine, anvil)

    assert await anvil.rpc.get_balance(to_first) == WEI
    assert await anvil.rpc.get_balance(to_second) == WEI
    fees = []
    for nonce, payout in enumerate((first, second)):
        row = await _row(pool, payout["id"])
        assert (row["status"], row["nonce"], row["fee_hold"]) == (
            "confirmed",
            nonce,
            Decimal("0.0063"),
        )
        receipt = await anvil.receipt(row["landed_tx_hash"])
        paid = Decimal(int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16))
        assert row["fee_paid"] == paid / WEI
        assert Decimal("0.0021") < row["fee_paid"] <= Decimal("0.0063")
        fees.append(row["fee_paid"])
    balance, held = await _account(pool, account)
    assert (balance, held) == (Decimal("2.02") - 2 - fees[0] - fees[1], Decimal(0))
    kinds = [(r["event_type"], r["amount"]) for r in await ledger_rows(pool, account)]
    assert sorted(kinds) == sorted(
        [("withdrawal", Decimal("-1"))] * 2 + [("withdrawal_fee", -f) for f in fees]
    )
    audit = await pool.fetch("SELECT * FROM payout_actions ORDER BY id")
    assert [(a["payout_id"], a["action"], a["actor"]) for a in audit] == [
        (first["id"], "resign", "alice"),
        (second["id"], "resign", "alice"),
    ]
    evidence = json.loads(audit[0]["chain_evidence"])
    assert evidence["fee_hold_raised"] == {"before": "0.0021", "after": "0.0063", "added": "0.0042"}


async def test_a_token_payout_fee_hold_is_not_raised(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    """A token payout's gas is the hot wallet's ETH: its fee hold (in the token) is no
    gas ceiling, so raising it is refused with what to do instead."""
    token = await anvil.deploy_token()
    await owner_pool.execute(
        "INSERT INTO chain_tokens (chain, contract, asset, decimals) VALUES ($1, $2, 'USDC', 6)",
        CHAIN,
        token,
    )
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    await anvil.receipt(await anvil.token_mint(token, hot, 1_000 * 10**6))
    account = await funded_account(owner_pool, "USDC", Decimal("50"))
    payout = await request_payout(pool, payout_settings, account, "5", fresh_address())
    await anvil.set_automine(False)
    await engine.tick()
    with pytest.raises(FeeHoldRefused, match="PAYOUT_MAX_FEE_PER_GAS_WEI"):
        await resign_payout(engine, payout["id"], actor="a", reason="r", raise_fee_hold="1")
    assert await _account(pool, account) == (Decimal("50"), Decimal("5"))


async def test_an_application_clock_behind_still_bumps_a_stuck_payout(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other direction of clock skew: this process's clock 10 minutes behind, a
    transaction 90 s old on the database's clock with `PAYOUT_STUCK_AFTER_S` 60 is
    bumped all the same (ages are PostgreSQL's, never the application's)."""
    import time

    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    engine.settings = payout_settings.model_copy(update={"payout_stuck_after_s": 60.0})
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    payout = await request_payout(pool, engine.settings, account, "1", fresh_address())
    await anvil.set_automine(False)
    await engine.tick()
    await owner_pool.execute(
        "UPDATE payout_txs SET created_at = now() - interval '90 seconds' WHERE payout_id = $1",
        payout["id"],
    )
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 600)
    await engine.tick()
    attempts = await pool.fetchval(
        "SELECT count(*) FROM payout_txs WHERE payout_id = $1", payout["id"]
    )
    assert attempts == 2
