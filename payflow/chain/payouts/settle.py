"""Finishing a payout at finality: post (status 1) or void (status 0), in ONE transaction.

Post only what the receipt proves (`proof.py`): status 1 AND the transfer in the receipt.
Post: compare-and-set signed|sent -> confirmed, release the whole hold, then post the
debit (`po:<id>`, withdrawal) and the fee (`pofee:<id>`, withdrawal_fee: the gas actually
paid for native payouts, `PAYOUT_TOKEN_FEE` for token payouts) through the ledger's
exactly-once path (`posting.post_within`), post the gas the mined transaction paid
(network_fees -> custody in the native asset, `moves.post_network_fee`, once per mined
transaction hash), and write the `confirmed` notification.
Void (status 0, or status 1 without the proving transfer): compare-and-set -> failed,
release the hold, post the fee (`pofee:<id>`: the gas the
reverted transaction paid, or `PAYOUT_TOKEN_FEE`) and the gas paid (network_fees ->
custody), `failed` notification; the nonce stays
consumed (recorded on the payout and its `payout_txs`). A reverted transaction is mined and
its gas is spent: the hot wallet paid it for the account's request, so the account pays
it back, as for a confirmed payout (otherwise a native payout to a contract that refuses
value would revert for free, again and again, and leave the hot wallet's gas unledgered).

Invariant: the compare-and-set makes every step here happen at most once per payout; a
second call finds the payout final and does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import asyncpg
import structlog

from payflow.chain.payouts.events import record_payout_event
from payflow.chain.payouts.holds import SQL, payout_event
from payflow.chain.payouts.records import (
    TOPIC_PAYOUT_NOTIFICATION,
    PayoutStatus,
    fee_event_id,
    withdrawal_event_id,
)
from payflow.config import DatabaseSettings
from payflow.db import Connection
from payflow.db.tx import transaction
from payflow.ledger.accounts import store_event
from payflow.ledger.moves import post_network_fee
from payflow.ledger.posting import post_within
from payflow.ledger.records import EventType
from payflow.money import from_base_units
from payflow.outbox.writer import enqueue

log = structlog.get_logger("payflow.payouts")


@dataclass(frozen=True, slots=True)
class Landed:
    """The receipt of the payout transaction that landed."""

    tx_hash: str
    status: int  # 1 success, 0 reverted
    block_number: int
    block_hash: str
    fee_wei: int  # gasUsed x effectiveGasPrice
    proven: bool  # the receipt proves the transfer (proof.py); False for a revert
    mismatch: bool = False  # the hot wallet's tokens moved otherwise: never settled
    # a mismatch's Transfers out of the hot wallet (`proof.hot_wallet_transfers`)
    transfers: tuple[dict[str, Any], ...] = ()


NOT_PROVEN = (
    "mined without moving the funds (no transfer to the recipient in the receipt, e.g. a"
    " token that returned false): the amount is released, the network fee paid is charged"
)
REVERTED = "reverted on chain: the amount is released, the network fee paid is charged"


def paid_fee(payout: Any, landed: Landed) -> Decimal:
    """The fee charged to the account: the gas paid (native) or the held token fee; never
    more than the fee held (fee bumps are capped at the hold, so only a payout bumped
    before that cap existed can have paid more: the excess is logged, the hot wallet's)."""
    held: Decimal = payout["fee_hold"]
    if payout["contract"] is not None:
        return held
    paid = from_base_units(landed.fee_wei, int(payout["decimals"]))
    if paid > held:
        log.error(
            "payflow.payouts.fee_above_hold",
            payout_id=str(payout["id"]),
            fee_paid=format(paid, "f"),
            fee_hold=format(held, "f"),
        )
        return held
    return paid


async def _record_and_post(
    conn: Connection, event_id: str, payout: Any, amount: Decimal, event_type: EventType
) -> None:
    await store_event(
        conn,
        event_id=event_id,
        account_id=payout["account_id"],
        amount=amount,
        event_type=event_type,
        trace_id=payout["trace_id"],
    )
    await post_within(conn, event_id, consumes_hold=True)


async def settle(
    pool: asyncpg.Pool, settings: DatabaseSettings, payout_id: Any, landed: Landed
) -> str | None:
    """Post or void a final payout; the new status, or None when it was already final.
    A `mismatch` landing is never settled here (`ValueError`): an operator decides."""
    if landed.mismatch:
        raise ValueError("a receipt that moved the hot wallet's tokens otherwise is not settled")
    async with pool.acquire() as conn, transaction(conn, settings):
        payout = await conn.fetchrow(SQL["get_payout"], payout_id)
        assert payout is not None
        moved = landed.status == 1 and landed.proven
        target = PayoutStatus.CONFIRMED if moved else PayoutStatus.FAILED
        failure = None if moved else (NOT_PROVEN if landed.status == 1 else REVERTED)
        row = await finalize_within(conn, payout, landed, target, failure)
        return None if row is None else target.value


async def finalize_within(
    conn: Connection, payout: Any, landed: Landed, target: PayoutStatus, failure: str | None
) -> Any:
    """In the caller's transaction: compare-and-set `payout` (open) to `target` with the
    `landed` receipt, release its hold (amount + fee hold), post the debit (`po:<id>`,
    confirmed only) and the fee paid (`pofee:<id>`, `paid_fee`), and write the
    notification. The finalized row, or None (nothing done) when it was already final."""
    fee = paid_fee(payout, landed)  # spent whether the transaction succeeded or not
    row = await conn.fetchrow(
        SQL["finalize_payout"],
        payout["id"],
        target.value,
        landed.tx_hash,
        landed.status,
        landed.block_number,
        landed.block_hash,
        fee,
        failure,
    )
    if row is None:
        return None
    await conn.execute(SQL["release_hold"], row["id"])
    if target is PayoutStatus.CONFIRMED:
        await _record_and_post(
            conn, withdrawal_event_id(row["id"]), row, row["amount"], EventType.WITHDRAWAL
        )
    if fee > 0:  # never above the fee held: the hold covered the gas at its ceiling
        await _record_and_post(conn, fee_event_id(row["id"]), row, fee, EventType.WITHDRAWAL_FEE)
    # The gas the mined transaction paid is payflow's expense, whatever the customer was
    # charged: network_fees -> custody, once per mined transaction.
    await post_network_fee(conn, row["chain"], landed.tx_hash, landed.fee_wei)
    await enqueue_notification(conn, row)
    return row


async def enqueue_notification(conn: Connection, row: Any, *, tx_hash: str | None = None) -> None:
    """The notification of `row`'s current status and its merchant's event (sent,
    confirmed, failed), in the caller's transaction; `tx_hash`: the transaction a node
    accepted (sent; otherwise the landed one)."""
    await enqueue(conn, TOPIC_PAYOUT_NOTIFICATION, payout_event(row), row["trace_id"])
    await record_payout_event(conn, row, PayoutStatus(row["status"]), tx_hash=tx_hash)
