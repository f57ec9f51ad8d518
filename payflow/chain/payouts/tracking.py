"""Tracking signed and sent payouts (the engine's second half): settle at finality what
the receipt proves, re-send, bump, and mark every payout that does not progress.

A payout that does not progress is marked with a `stall` (migration 0026) and alerted on
(`payouts.stalled`) until it moves again or an operator resolves it (`actions.py`):

- `unaccepted`: the node refuses its transaction (underpriced, base fee above our max
  fee, anything but "already known"); fee refusals are bumped at once, up to the hold;
- `unmined`: accepted but not mined `PAYOUT_STUCK_AFTER_S` after its latest attempt and
  no further bump is allowed (the payout's fee hold is its ceiling);
- `transfer_mismatch` (migration 0028): a mined receipt moved the hot wallet's tokens
  otherwise than exactly the payout (`proof.py`); the detail lists each Transfer out of
  the hot wallet (contract, from, to, units). It is never settled by the job and its hold
  stays until an operator settles it (`payflow payouts settle`, `actions_settle.py`);
- `nonce_taken`: "nonce too low" while none of its transactions has a receipt and the
  chain's mined count is past its nonce: another signer used the nonce, ours can never
  be mined. Only an operator can void or re-sign it.

Every age is read from PostgreSQL (`now()` in SQL): one clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import asyncpg
import structlog

from payflow.alerts import Severity
from payflow.chain.payouts.broadcast import Answer, Broadcast
from payflow.chain.payouts.holds import SQL
from payflow.chain.payouts.plan import TickReport, bumped_fees, fee_ceiling, payout_call
from payflow.chain.payouts.proof import (
    Proof,
    describe_transfers,
    hot_wallet_transfers,
    receipt_proof,
)
from payflow.chain.payouts.records import PayoutStatus, Stall
from payflow.chain.payouts.settle import Landed, settle
from payflow.chain.payouts.signer import SignedTx
from payflow.chain.payouts.signing import mined_count
from payflow.chain.rpc import hex_int
from payflow.db.tx import transaction
from payflow.errors import ChainUnavailable, PayflowError
from payflow.metrics import PAYOUTS

if TYPE_CHECKING:
    from payflow.chain.payouts.engine import PayoutEngine

log = structlog.get_logger("payflow.payouts")

_FEE_REFUSALS = (Broadcast.UNDERPRICED,)
# a mined receipt that moved the hot wallet's tokens otherwise than the payout (proof.py):
# never settled by the job, the hold kept, stored and alerted critical under this name
TRANSFER_MISMATCH = Stall.TRANSFER_MISMATCH.value
DETAIL_MAX = 2000  # characters of `stall_detail` (a mismatch lists every Transfer)
MAX_BUMPS_PER_RUN = 8  # fee bumps after refusals in one run (each +PAYOUT_FEE_BUMP_PERCENT)
_NOT_ACCEPTED = (Broadcast.UNDERPRICED, Broadcast.REJECTED, Broadcast.NO_FUNDS)


async def track(engine: PayoutEngine, report: TickReport) -> None:
    """Receipts of every signed or sent payout: settle at finality, re-send or bump;
    alert `payouts.stuck` (at the fee ceiling) and `payouts.stalled` (any stall)."""
    async with engine.pool.acquire() as conn:
        open_rows = await conn.fetch(
            SQL["open_payouts"], engine.chain, engine.settings.payout_batch_size
        )
    if not open_rows:
        await engine.alerts.resolve("payouts.stuck")
        await engine.alerts.resolve("payouts.stalled")
        return
    finalized = await engine.finalized_height()
    stuck: list[str] = []
    stalls: dict[str, list[str]] = {}
    for payout in open_rows:
        try:
            stall = await track_one(engine, payout, finalized, report)
        except ChainUnavailable:
            raise  # the node: the whole run waits for the next tick
        except (PayflowError, asyncpg.PostgresError) as error:
            # one payout's trouble never holds up the others; the next run retries it
            report.errors += 1
            log.error(
                "payflow.payouts.track_failed",
                payout_id=str(payout["id"]),
                error=f"{type(error).__name__}: {error}",
            )
            continue
        if stall is not None:
            stalls.setdefault(str(stall), []).append(str(payout["id"]))
            if stall is Stall.UNMINED:
                stuck.append(str(payout["id"]))
    report.stuck = len(stuck)
    report.stalled = sum(len(ids) for ids in stalls.values())
    report.pending = [str(p["id"]) for p in open_rows]
    if stuck:
        await engine.alerts.fire(
            "payouts.stuck",
            Severity.WARNING,
            f"{len(stuck)} payout transaction(s) stuck and cannot be bumped further",
            details={"chain": engine.chain, "payouts": stuck[:20]},
        )
    else:
        await engine.alerts.resolve("payouts.stuck")
    await alert_stalls(engine, stalls)


async def alert_stalls(engine: PayoutEngine, stalls: dict[str, list[str]]) -> None:
    """Fire `payouts.stalled` (critical when a nonce was taken or a receipt moved the hot
    wallet's tokens otherwise than the payout: only an operator can resolve those) naming
    the payouts per stall, or resolve it when there is none."""
    if not stalls:
        await engine.alerts.resolve("payouts.stalled")
        return
    counts = ", ".join(f"{len(ids)} {kind}" for kind, ids in sorted(stalls.items()))
    operator_only = {Stall.NONCE_TAKEN.value, Stall.TRANSFER_MISMATCH.value}
    severity = Severity.CRITICAL if operator_only & stalls.keys() else Severity.WARNING
    await engine.alerts.fire(
        "payouts.stalled",
        severity,
        f"payouts not progressing on {engine.chain}: {counts}; see `payflow wallet status`,"
        " resolve with `payflow payouts void|resign ID --reason ... --by ...` (a"
        " transfer_mismatch: `payflow payouts settle ID --as confirmed|failed ...`)",
        details={"chain": engine.chain, **{k: ids[:20] for k, ids in stalls.items()}},
    )


async def set_stall(engine: PayoutEngine, payout: Any, stall: Stall | None, detail: str) -> None:
    """Record (or clear, with None) why `payout` does not progress."""
    if stall is None and payout["stall"] is None:
        return
    async with engine.pool.acquire() as conn, transaction(conn, engine.settings):
        if stall is None:
            await conn.execute(SQL["clear_stall"], payout["id"])
        else:
            await conn.execute(SQL["mark_stall"], payout["id"], stall.value, detail[:DETAIL_MAX])
    if stall is not None and payout["stall"] != stall.value:
        log.warning(
            "payflow.payouts.stalled",
            payout_id=str(payout["id"]),
            stall=stall.value,
            detail=detail[:DETAIL_MAX],
        )


async def track_one(
    engine: PayoutEngine, payout: Any, finalized: int, report: TickReport
) -> str | None:
    """Settle, re-send or bump one payout; its stall, or None when it progresses."""
    async with engine.pool.acquire() as conn:
        txs = await conn.fetch(SQL["payout_txs"], payout["id"])
    landed = await engine.landed(payout, txs)
    if landed is not None:
        if landed.mismatch:
            detail = describe_transfers(list(landed.transfers))
            await set_stall(engine, payout, Stall.TRANSFER_MISMATCH, detail)
        else:
            await set_stall(engine, payout, None, "")
        await on_landed(engine, payout, landed, finalized, report)
        return Stall.TRANSFER_MISMATCH if landed.mismatch else None
    if payout["stall"] == Stall.TRANSFER_MISMATCH:  # its receipt left the chain (a reorg)
        await set_stall(engine, payout, None, "")
    if payout["landed_tx_hash"] is not None:
        log.warning(
            "payflow.payouts.dropped",
            payout_id=str(payout["id"]),
            tx_hash=payout["landed_tx_hash"],
        )
        async with engine.pool.acquire() as conn, transaction(conn, engine.settings):
            await conn.execute(SQL["clear_landed"], payout["id"])
    latest = txs[-1]
    age = float(payout["latest_age_s"])  # the database's clock
    unmined = False
    answer: Answer | None = None
    if payout["status"] == PayoutStatus.SENT and age >= engine.settings.payout_stuck_after_s:
        answer = await bump(engine, payout, latest)
        if answer is not None:
            report.bumped += 1
            PAYOUTS.labels("bumped").inc()
        else:
            unmined = True  # at the ceiling: keep the latest attempt in the mempool
    if answer is None:
        signed = SignedTx(raw=latest["raw_tx"], tx_hash=latest["tx_hash"])
        answer = await engine.send(payout["id"], signed)
        report.rebroadcast += 1
    for _ in range(MAX_BUMPS_PER_RUN):  # a fee refusal: bump now, up to the hold
        if answer.outcome not in _FEE_REFUSALS:
            break
        async with engine.pool.acquire() as conn:
            latest = (await conn.fetch(SQL["payout_txs"], payout["id"]))[-1]
        bumped = await bump(engine, payout, latest)
        if bumped is None:
            break
        report.bumped += 1
        PAYOUTS.labels("bumped").inc()
        answer = bumped
    return await _judge(engine, payout, txs, answer, unmined, age)


async def _judge(
    engine: PayoutEngine, payout: Any, txs: list[Any], answer: Answer, unmined: bool, age: float
) -> Stall | None:
    """The payout's stall after this run's broadcast `answer`, recorded."""
    if answer.outcome is Broadcast.NONCE_USED:
        if await nonce_taken(engine, payout, txs):
            await set_stall(
                engine,
                payout,
                Stall.NONCE_TAKEN,
                f"nonce {payout['nonce']} was used by another transaction of"
                f" {payout['hot_wallet']}; none of this payout's transactions was mined"
                f" (node: {answer.detail})",
            )
            return Stall.NONCE_TAKEN
        return None  # ours is mined and its receipt will show next run
    if answer.outcome in _NOT_ACCEPTED:
        await set_stall(engine, payout, Stall.UNACCEPTED, f"node refused: {answer.detail}")
        return Stall.UNACCEPTED
    if unmined:
        await set_stall(
            engine,
            payout,
            Stall.UNMINED,
            f"not mined {age:.0f} s after its latest attempt and at its fee ceiling",
        )
        return Stall.UNMINED
    if answer.outcome is Broadcast.ACCEPTED:
        await set_stall(engine, payout, None, "")
    return None  # unavailable: nothing learnt, the next run asks again


async def nonce_taken(engine: PayoutEngine, payout: Any, txs: list[Any]) -> bool:
    """True when the chain's mined count of the payout's wallet is past its nonce and
    none of the payout's transactions has a receipt (asked again after the count, so a
    transaction of ours mined in between is never taken for another signer's)."""
    count = await mined_count(engine, payout["hot_wallet"])
    if count <= int(payout["nonce"]):
        return False
    async with engine.pool.acquire() as conn:  # every attempt, this run's bumps included
        txs = await conn.fetch(SQL["payout_txs"], payout["id"])
    return await engine.landed(payout, txs) is None


async def on_landed(
    engine: PayoutEngine, payout: Any, landed: Landed, finalized: int, report: TickReport
) -> None:
    if payout["status"] == PayoutStatus.SIGNED:  # mined before we recorded the send
        await engine.mark_sent(payout["id"], None)
    async with engine.pool.acquire() as conn, transaction(conn, engine.settings):
        await conn.execute(
            SQL["record_landed"],
            payout["id"],
            landed.tx_hash,
            landed.status,
            landed.block_number,
            landed.block_hash,
        )
    if landed.mismatch:
        log.error(  # never settled by the job: the hold stays, an operator decides
            "payflow.payouts.transfer_mismatch",
            payout_id=str(payout["id"]),
            tx_hash=landed.tx_hash,
            contract=payout["contract"],
        )
        return
    if landed.status == 1 and not landed.proven:
        log.error(  # settles failed at finality: nothing the payout asked for moved
            "payflow.payouts.not_proven",
            payout_id=str(payout["id"]),
            tx_hash=landed.tx_hash,
            contract=payout["contract"],
        )
    if not await engine.is_final(landed, finalized):
        return
    outcome = await settle(engine.pool, engine.settings, payout["id"], landed)
    if outcome == PayoutStatus.CONFIRMED:
        report.confirmed += 1
    elif outcome == PayoutStatus.FAILED:
        report.failed += 1
    if outcome is not None:
        PAYOUTS.labels(outcome).inc()
    log.info(
        "payflow.payouts.settled",
        payout_id=str(payout["id"]),
        outcome=outcome,
        tx_hash=landed.tx_hash,
        proven=landed.proven,
    )


async def landed(engine: PayoutEngine, payout: Any, txs: list[Any]) -> Landed | None:
    """The receipt of whichever of the payout's transactions is mined, with what it
    proves (`proof.py`); None when none is."""
    calls = [("eth_getTransactionReceipt", [tx["tx_hash"]]) for tx in txs]
    receipts = await engine.rpc.batch(calls)
    for receipt in receipts:
        if receipt:
            gas = hex_int(receipt["gasUsed"]) or 0
            price = hex_int(receipt.get("effectiveGasPrice")) or 0
            proof = await receipt_proof(engine.rpc, payout, receipt)
            return Landed(
                tx_hash=receipt["transactionHash"].lower(),
                status=hex_int(receipt["status"]) or 0,
                block_number=hex_int(receipt["blockNumber"]) or 0,
                block_hash=receipt["blockHash"].lower(),
                fee_wei=gas * price,
                proven=proof is Proof.PROVEN,
                mismatch=proof is Proof.MISMATCH,
                transfers=tuple(hot_wallet_transfers(payout, receipt))
                if proof is Proof.MISMATCH
                else (),
            )
    return None


async def bump(engine: PayoutEngine, payout: Any, latest: Any) -> Answer | None:
    """Replace the latest attempt: same nonce, fees up by `PAYOUT_FEE_BUMP_PERCENT` (at
    least the +10% nodes require), never above the payout's fee ceiling (its own hold;
    `plan.fee_ceiling`). The new attempt is stored before it is sent. None when the
    ceiling forbids a bump (or the payout moved); else the node's answer to it."""
    ceiling = fee_ceiling(engine.settings, payout, int(latest["gas_limit"]))
    fees = bumped_fees(engine.settings, latest, await engine.fees(), ceiling)
    if fees is None:
        return None
    wallet = engine.wallets.get(payout["hot_wallet"])
    if wallet is None:
        return None
    chain_id = await engine.chain_id()
    async with engine.pool.acquire() as conn, transaction(conn, engine.settings):
        row = await conn.fetchrow(SQL["lock_open_payout"], payout["id"])
        if row is None or row["nonce"] != payout["nonce"]:
            return None
        attempt = await conn.fetchval(SQL["next_attempt"], payout["id"])
        to, value, data = payout_call(row)
        signed = wallet.sign(
            chain_id=chain_id, nonce=int(row["nonce"]), to=to, value=value, data=data, fees=fees
        )
        await engine.store(
            conn, row["id"], attempt, wallet.address, int(row["nonce"]), signed, fees
        )
    log.warning(
        "payflow.payouts.fee_bumped",
        payout_id=str(payout["id"]),
        attempt=attempt,
        tx_hash=signed.tx_hash,
        max_fee_per_gas=fees.max_fee_per_gas,
    )
    return await engine.send(payout["id"], signed)
