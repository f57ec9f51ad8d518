"""Operator actions against what the chain may still do: a transaction that went public
can be mined after our node forgot it, and two operators may act on one payout at once.
Real anvil, real PostgreSQL, real CLI processes."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import asyncpg
import pytest

from payflow.chain.payouts.actions import ActionRefused, resign_payout, void_payout
from payflow.chain.payouts.engine import PayoutEngine
from payflow.config import Settings
from payflow_lab.anvil import AnvilNode
from tests.integration.payouts.conftest import (
    WEI,
    fresh_address,
    funded_account,
    ledger_rows,
    request_payout,
    settle_all,
)
from tests.integration.payouts.test_proof_and_stalls import _cli, _take_the_nonce


async def test_a_public_transaction_our_node_dropped_is_not_voided_and_pays_once(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    """The node accepted the payout's transaction (it went public), then dropped it from
    its mempool; other nodes may still hold it. Voiding it would release the hold (and
    give its nonce back) while it can still be mined: refused. Re-signing at the same
    nonce is allowed; when the OLD transaction is mined after all, the payout settles on
    it, once: one debit, the recipient paid once, nothing released twice."""
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    to = fresh_address()
    payout = await request_payout(pool, payout_settings, account, "1", to)
    await anvil.set_automine(False)
    await engine.tick()  # accepted by the node: public now
    (old,) = await pool.fetch("SELECT tx_hash, raw_tx FROM payout_txs")
    await anvil.rpc.call("anvil_dropTransaction", old["tx_hash"])

    with pytest.raises(ActionRefused, match="accepted by the node"):
        await void_payout(engine, payout["id"], actor="ops", reason="lost")
    row = await pool.fetchrow("SELECT status FROM payouts WHERE id = $1", payout["id"])
    assert row["status"] == "sent"
    assert await pool.fetchval("SELECT next_nonce FROM hot_wallets") == 1

    result = await resign_payout(engine, payout["id"], actor="ops", reason="lost")
    assert result.new_nonce == 0
    await anvil.rpc.call("anvil_dropTransaction", result.tx_hash)
    # another node still had the old one: it is mined after all
    await anvil.rpc.call("eth_sendRawTransaction", old["raw_tx"])
    await anvil.set_automine(True)
    await anvil.mine(1)
    await settle_all(engine, anvil)

    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    assert (row["status"], row["landed_tx_hash"]) == ("confirmed", old["tx_hash"])
    assert await anvil.rpc.get_balance(to) == WEI
    rows = await ledger_rows(pool, account)
    assert [r["event_type"] for r in rows] == ["withdrawal", "withdrawal_fee"]
    acct = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    assert (acct["balance"], acct["held"]) == (Decimal(4) - row["fee_paid"], Decimal(0))


@pytest.mark.parametrize("pair", [("void", "resign"), ("resign", "resign"), ("void", "void")])
async def test_two_operators_acting_at_once_exactly_one_wins(
    pair: tuple[str, str],
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    hot_key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two CLI processes act on one payout whose nonce another signer took. The test holds
    the payout's row lock until both have read the chain and wait on it, so both decide
    on the same evidence: exactly one wins (exit 0, one audit row), the other says one
    line and changes nothing; the hold is released at most once, one nonce allocated at
    most once."""
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    payout = await request_payout(pool, payout_settings, account, "1", fresh_address())
    await anvil.set_automine(False)
    await engine.tick()
    await _take_the_nonce(anvil, engine, hot_key)
    await engine.tick()
    pid = str(payout["id"])
    # the processes may start seconds apart on a loaded machine: they wait for the lock
    monkeypatch.setenv("LOCK_TIMEOUT_MS", "300000")
    monkeypatch.setenv("STATEMENT_TIMEOUT_MS", "300000")
    async with owner_pool.acquire() as blocker:
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("SELECT 1 FROM payouts WHERE id = $1 FOR UPDATE", payout["id"])
        runs = [
            asyncio.create_task(
                _cli(payout_settings, hot_key, act, pid, "--reason", f"r{i}", "--by", f"op{i}")
            )
            for i, act in enumerate(pair)
        ]
        for _ in range(1800):  # both wait on the row lock (at most 3 min on a loaded box)
            waiting = await owner_pool.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database()"
            )
            if waiting >= 2 or all(r.done() for r in runs):
                break
            await asyncio.sleep(0.1)
        assert waiting >= 2, [r.result() for r in runs if r.done()]
        await tx.rollback()
        results = await asyncio.gather(*runs)
    codes = sorted(code for code, _out, _err in results)
    assert codes == [0, 1], results
    loser = next(err for code, _out, err in results if code == 1)
    assert loser.count("\n") == 1 and "changed meanwhile" in loser
    audit = await pool.fetch("SELECT action FROM payout_actions WHERE payout_id = $1", payout["id"])
    assert len(audit) == 1
    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    acct = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    if audit[0]["action"] == "void":
        assert row["status"] == "failed"
        assert (acct["balance"], acct["held"]) == (Decimal(5), Decimal(0))
    else:
        assert (row["status"], row["nonce"]) in (("signed", 1), ("sent", 1))
        assert acct["held"] == Decimal("1.0021")
        assert await pool.fetchval("SELECT next_nonce FROM hot_wallets") == 2
