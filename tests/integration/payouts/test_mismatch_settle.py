"""A receipt that moved the hot wallet's tokens otherwise than the payout (a transfer
mismatch) is stored as a stall, listed where operators look, and settled only by an
audited operator action once its receipt is final, exactly once. Real anvil (the puppet
token, `puppet.py`), real PostgreSQL, real CLI processes."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from typing import Any

import asyncpg
import pytest

from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.wallet import stalled_counts
from payflow.config import Settings
from payflow_lab.anvil import AnvilNode
from tests.integration.payouts.conftest import (
    CHAIN,
    WEI,
    fresh_address,
    funded_account,
    ledger_rows,
    request_payout,
)
from tests.integration.payouts.puppet import puppet
from tests.integration.payouts.test_proof_and_stalls import _cli

UNITS = 5_000_000  # 5 USDC at 6 decimals


async def _mismatched(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    engine: PayoutEngine,
    logs: Any = None,
) -> dict[str, Any]:
    """A 5 USDC payout whose token logs 4.999999 to the recipient and 0.000001 to a
    stranger (or `logs(hot, to, stranger)`), mined and tracked, its receipt not final yet."""
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    to, stranger, token = fresh_address(), fresh_address(), fresh_address()
    made = logs or (lambda h, t, s: [(h, t, UNITS - 1), (h, s, 1)])
    await puppet(anvil, token, made(hot, to, stranger))
    await owner_pool.execute(
        "INSERT INTO chain_tokens (chain, contract, asset, decimals) VALUES ($1, $2, 'USDC', 6)",
        CHAIN,
        token,
    )
    account = await funded_account(owner_pool, "USDC", Decimal("50"))
    with_fee = settings.model_copy(update={"payout_token_fee": Decimal("0.5")})
    payout = await request_payout(pool, with_fee, account, "5", to)
    await engine.tick()  # signed, sent, mined (automine)
    await engine.tick()  # its receipt read: a mismatch, not final yet
    return {
        "id": payout["id"],
        "account": account,
        "hot": hot,
        "to": to,
        "token": token,
        "stranger": stranger,
    }


def _json(out: str) -> Any:
    """The command's JSON (after its own log line)."""
    return (
        json.loads(out[out.index("{") :])
        if out.startswith("{")
        else json.loads(out[out.index("\n{") :])
    )


async def _balances(pool: asyncpg.Pool, account: Any) -> tuple[Decimal, Decimal]:
    row = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    return row["balance"], row["held"]


async def test_a_mismatch_is_stored_listed_and_settled_confirmed_once_final(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    hot_key: str,
) -> None:
    p = await _mismatched(anvil, pool, owner_pool, payout_settings, engine)
    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", p["id"])
    assert (row["status"], row["stall"]) == ("sent", "transfer_mismatch")
    detail = row["stall_detail"]
    for part in (
        f"contract {p['token']} from {p['hot']} to {p['to']} units {UNITS - 1}",
        f"contract {p['token']} from {p['hot']} to {p['stranger']} units 1",
    ):
        assert part in detail
    async with pool.acquire() as conn:
        assert (await stalled_counts(conn, 3600.0)) == {"transfer_mismatch": 1}
    code, out, err = await _cli(payout_settings, hot_key, "stalled")
    assert code == 0, err
    (listed,) = json.loads(out)
    assert (listed["payout_id"], listed["stall"]) == (str(p["id"]), "transfer_mismatch")
    assert p["stranger"] in listed["detail"]

    pid = str(p["id"])
    args = ("settle", pid, "--as", "confirmed", "--reason", "fee-on-transfer", "--by", "ann")
    code, out, err = await _cli(payout_settings, hot_key, *args)
    assert code == 1 and "not final" in err and err.count("\n") == 1, (out, err)
    assert await _balances(pool, p["account"]) == (Decimal(50), Decimal(5) + row["fee_hold"])

    await anvil.mine(3)
    code, out, err = await _cli(payout_settings, hot_key, *args)
    assert code == 0, err
    result = _json(out)
    assert (result["status"], result["amount_debited"]) == ("confirmed", "5")
    assert result["fee_charged"] == "0.5"
    fee = row["fee_hold"]  # a token payout is charged PAYOUT_TOKEN_FEE, its fee hold
    assert await _balances(pool, p["account"]) == (Decimal(45) - fee, Decimal(0))
    rows = await ledger_rows(pool, p["account"])
    assert [r["event_type"] for r in rows] == ["withdrawal", "withdrawal_fee"]
    (audit,) = await pool.fetch("SELECT * FROM payout_actions WHERE payout_id = $1", p["id"])
    assert (audit["action"], audit["actor"], audit["reason"]) == (
        "settle",
        "ann",
        "fee-on-transfer",
    )
    evidence = json.loads(audit["chain_evidence"])
    assert evidence["as"] == "confirmed" and evidence["receipt_status"] == 1
    assert {(t["to"], t["units"]) for t in evidence["transfers"]} == {
        (p["to"], str(UNITS - 1)),
        (p["stranger"], "1"),
    }
    after = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", p["id"])
    assert after["stall"] is None and after["fee_paid"] == fee

    # again: refused, nothing posted twice
    code, out, err = await _cli(payout_settings, hot_key, *args)
    assert code == 1 and "is confirmed" in err, (out, err)
    assert len(await ledger_rows(pool, p["account"])) == 2
    assert await pool.fetchval("SELECT count(*) FROM payout_actions") == 1


async def test_settled_failed_releases_the_hold_and_charges_the_fee(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    hot_key: str,
) -> None:
    logs = lambda h, t, s: [(h, s, UNITS)]  # noqa: E731 - all elsewhere
    p = await _mismatched(anvil, pool, owner_pool, payout_settings, engine, logs)
    await anvil.mine(3)
    await engine.tick()  # final now: the job still does not settle it
    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", p["id"])
    assert (row["status"], row["stall"]) == ("sent", "transfer_mismatch")
    code, out, err = await _cli(
        payout_settings,
        hot_key,
        "settle",
        str(p["id"]),
        "--as",
        "failed",
        "--reason",
        "sent to the wrong address by the token",
        "--by",
        "bob",
    )
    assert code == 0, err
    assert _json(out)["status"] == "failed"
    fee = row["fee_hold"]
    assert await _balances(pool, p["account"]) == (Decimal(50) - fee, Decimal(0))
    rows = await ledger_rows(pool, p["account"])
    assert [r["event_type"] for r in rows] == ["withdrawal_fee"]
    after = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", p["id"])
    assert after["status"] == "failed" and "bob" in after["failure"]
    assert after["stall"] is None


async def test_settle_is_refused_for_anything_but_a_final_mismatch(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    hot_key: str,
) -> None:
    """A proven payout settles by itself (its receipt is not a mismatch); an unknown id,
    a bad --as, a missing --reason: one line, nothing changed."""
    logs = lambda h, t, s: [(h, t, UNITS)]  # noqa: E731 - exactly the payout
    await anvil.set_automine(False)  # mined after the job's runs
    p = await _mismatched(anvil, pool, owner_pool, payout_settings, engine, logs)
    await anvil.mine(1)
    pid = str(p["id"])
    code, _out, err = await _cli(
        payout_settings, hot_key, "settle", pid, "--as", "confirmed", "--reason", "x", "--by", "a"
    )
    assert code == 1 and "not a transfer mismatch" in err, err
    for bad, expect in (
        (("settle", pid, "--as", "paid", "--reason", "x"), "--as confirmed or --as failed"),
        (("settle", pid, "--as", "failed"), "--reason is required"),
        (("settle", "nope", "--as", "failed", "--reason", "x"), "not a payout id"),
    ):
        code, _out, err = await _cli(payout_settings, hot_key, *bad)
        assert code == 2 and expect in err, err
    import uuid

    code, _out, err = await _cli(
        payout_settings, hot_key, "settle", str(uuid.uuid4()), "--as", "failed", "--reason", "x"
    )
    assert code == 1 and "does not exist" in err, err
    assert await pool.fetchval("SELECT count(*) FROM payout_actions") == 0
    assert await ledger_rows(pool, p["account"]) == []


async def test_two_operators_settling_at_once_exactly_one_wins(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    hot_key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two CLI processes settle one final mismatch (one as confirmed, one as failed); the
    test holds the row lock until both wait on it. One wins (exit 0, one audit row, one
    set of postings), the other says one line and changes nothing."""
    p = await _mismatched(anvil, pool, owner_pool, payout_settings, engine)
    await anvil.mine(3)
    pid = str(p["id"])
    monkeypatch.setenv("LOCK_TIMEOUT_MS", "300000")
    monkeypatch.setenv("STATEMENT_TIMEOUT_MS", "300000")
    async with owner_pool.acquire() as blocker:
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("SELECT 1 FROM payouts WHERE id = $1 FOR UPDATE", p["id"])
        runs = [
            asyncio.create_task(
                _cli(
                    payout_settings,
                    hot_key,
                    "settle",
                    pid,
                    "--as",
                    outcome,
                    "--reason",
                    f"r{i}",
                    "--by",
                    f"op{i}",
                )
            )
            for i, outcome in enumerate(("confirmed", "failed"))
        ]
        for _ in range(1800):
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
    assert sorted(code for code, _o, _e in results) == [0, 1], results
    loser = next(err for code, _o, err in results if code == 1)
    assert loser.count("\n") == 1 and "settled meanwhile" in loser
    (audit,) = await pool.fetch("SELECT * FROM payout_actions WHERE payout_id = $1", p["id"])
    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", p["id"])
    assert row["status"] == json.loads(audit["chain_evidence"])["as"]
    kinds = [r["event_type"] for r in await ledger_rows(pool, p["account"])]
    held = (await _balances(pool, p["account"]))[1]
    assert held == 0
    if row["status"] == "confirmed":
        assert kinds == ["withdrawal", "withdrawal_fee"]
    else:
        assert kinds == ["withdrawal_fee"]


async def test_downgrading_below_0028_refuses_while_a_mismatch_is_stored(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
    migration_url: str,
) -> None:
    """The older CHECK cannot hold `transfer_mismatch`: the downgrade refuses (nothing
    changed) unless forced; forced, the mark goes and the payout stays open, held."""
    from payflow.db import migrate

    p = await _mismatched(anvil, pool, owner_pool, payout_settings, engine)
    owner = payout_settings.db_owner_role
    with pytest.raises(migrate.DataLossRefused, match="transfer mismatch"):
        await asyncio.to_thread(
            migrate.downgrade, migration_url, "0027_chain_identity", owner_role=owner
        )
    row = await pool.fetchrow("SELECT status, stall FROM payouts WHERE id = $1", p["id"])
    assert (row["status"], row["stall"]) == ("sent", "transfer_mismatch")
    await pool.expire_connections()
    await asyncio.to_thread(
        migrate.downgrade, migration_url, "0027_chain_identity", force=True, owner_role=owner
    )
    row = await owner_pool.fetchrow("SELECT status, stall FROM payouts WHERE id = $1", p["id"])
    assert (row["status"], row["stall"]) == ("sent", None)
    with pytest.raises(asyncpg.CheckViolationError):
        await owner_pool.execute(
            "UPDATE payouts SET stall = 'transfer_mismatch', stalled_at = now() WHERE id = $1",
            p["id"],
        )
    await asyncio.to_thread(migrate.upgrade, migration_url, owner_role=owner)
