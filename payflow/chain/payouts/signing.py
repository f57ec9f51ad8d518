"""Signing held payouts exactly once (the engine's first half).

In ONE transaction the held payout is locked, the nonce is taken from `hot_wallets` (row
lock; never below the chain's mined count, so nonces another signer consumed are
skipped), the transaction is signed with fees capped at the payout's own fee hold
(`plan.fee_ceiling`), its raw bytes and hash are stored (`payout_txs`) and the payout
becomes `signed`. Only after that commit is anything broadcast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from payflow.alerts import Severity
from payflow.chain.payouts.broadcast import Broadcast
from payflow.chain.payouts.funds import WalletFunds, load_funds, need_of
from payflow.chain.payouts.holds import SQL
from payflow.chain.payouts.plan import TickReport, capped_fees, fee_ceiling, payout_call
from payflow.chain.payouts.signer import HotWallet, SignedTx, TxFees
from payflow.chain.rpc import hex_int
from payflow.db.tx import transaction
from payflow.metrics import PAYOUTS

if TYPE_CHECKING:
    from payflow.chain.payouts.engine import PayoutEngine

log = structlog.get_logger("payflow.payouts")


async def sign_held(engine: PayoutEngine, report: TickReport) -> None:
    """Sign (exactly once) and send the held payouts the hot wallets can pay now."""
    async with engine.pool.acquire() as conn:
        held = await conn.fetch(
            SQL["held_payouts"], engine.chain, engine.settings.payout_batch_size
        )
    if not held:
        await engine.alerts.resolve("payouts.hot_wallet_low")
        return
    base_fees = await engine.fees()
    contracts = {p["contract"] for p in held if p["contract"] is not None}
    funds = {
        address: await load_funds(engine.pool, engine.rpc, engine.chain, address, contracts)
        for address in engine.wallets
    }
    order = list(engine.wallets)
    waiting: list[Any] = []
    frozen = [p for p in held if p["account_status"] != "active"]
    async with engine.pool.acquire() as conn, transaction(conn, engine.database):
        for payout in frozen:  # not signed while frozen: the freeze may be for fraud
            await conn.execute(SQL["set_wait_reason"], payout["id"], "account frozen")
    for payout in (p for p in held if p["account_status"] == "active"):
        gas_limit = engine.gas_limit(payout)
        fees = capped_fees(
            TxFees(gas_limit, base_fees.max_fee_per_gas, base_fees.max_priority_fee_per_gas),
            fee_ceiling(engine.settings, payout, gas_limit),
        )
        need = need_of(payout, fees)
        wallet = _pick(engine, order, funds, need)
        if wallet is None:
            waiting.append(payout)
            continue
        signed = await sign_one(engine, payout, wallet, fees)
        if signed is None:
            continue
        funds[wallet.address].spend(need)
        report.signed += 1
        PAYOUTS.labels("signed").inc()
        answer = await engine.send(payout["id"], signed)
        if answer.outcome is Broadcast.ACCEPTED:
            report.sent += 1
    report.waiting = len(waiting)
    PAYOUTS.labels("waiting").inc(len(waiting))
    await _waiting(engine, waiting, funds)


def _pick(
    engine: PayoutEngine, order: list[str], funds: dict[str, WalletFunds], need: Any
) -> HotWallet | None:
    for offset in range(len(order)):
        address = order[(engine.next_wallet + offset) % len(order)]
        if funds[address].covers(need):
            engine.next_wallet = (engine.next_wallet + offset + 1) % len(order)
            return engine.wallets[address]
    return None


async def _waiting(engine: PayoutEngine, waiting: list[Any], funds: dict[str, WalletFunds]) -> None:
    reason = "hot wallet balance too low"
    async with engine.pool.acquire() as conn, transaction(conn, engine.database):
        for payout in waiting:
            await conn.execute(SQL["set_wait_reason"], payout["id"], reason)
    if not waiting:
        await engine.alerts.resolve("payouts.hot_wallet_low")
        return
    await engine.alerts.fire(
        "payouts.hot_wallet_low",
        Severity.WARNING,
        f"{len(waiting)} payout(s) wait: the hot wallet cannot pay them; fund it",
        details={
            "chain": engine.chain,
            "waiting": len(waiting),
            "wallets": {a: f.describe() for a, f in funds.items()},
        },
    )


async def mined_count(engine: PayoutEngine, address: str) -> int:
    """The chain's mined transaction count of `address` (its next free nonce at latest)."""
    return hex_int(await engine.rpc.call("eth_getTransactionCount", address, "latest")) or 0


async def sign_one(
    engine: PayoutEngine, payout: Any, wallet: HotWallet, fees: TxFees
) -> SignedTx | None:
    """Allocate the nonce, sign, store the raw tx, mark signed: one transaction.
    None when the payout is no longer held (another signer took it)."""
    chain_id = await engine.chain_id()
    floor = await mined_count(engine, wallet.address)
    async with engine.pool.acquire() as conn, transaction(conn, engine.database):
        row = await conn.fetchrow(SQL["lock_held_payout"], payout["id"])
        if row is None:
            return None
        nonce = await conn.fetchval(SQL["allocate_nonce"], engine.chain, wallet.address, floor)
        to, value, data = payout_call(row)
        signed = wallet.sign(
            chain_id=chain_id, nonce=nonce, to=to, value=value, data=data, fees=fees
        )
        await engine.store(conn, row["id"], 1, wallet.address, nonce, signed, fees)
        await conn.execute(SQL["mark_signed"], row["id"], wallet.address, nonce)
    log.info(
        "payflow.payouts.signed",
        payout_id=str(row["id"]),
        tx_hash=signed.tx_hash,
        nonce=nonce,
        wallet=wallet.address,
    )
    return signed
