"""Finishing a payout at finality: post (status 1) or void (status 0), in ONE transaction.

Post: compare-and-set signed|sent -> confirmed, release the whole hold, then post the
debit (`po:<id>`, withdrawal) and the fee (`pofee:<id>`, withdrawal_fee: the gas actually
paid for native payouts, `PAYOUT_TOKEN_FEE` for token payouts) through the ledger's
exactly-once path (`posting.post_within`), and write the `confirmed` notification.
Void: compare-and-set -> failed, release the hold, post the fee (`pofee:<id>`: the gas the
reverted transaction paid, or `PAYOUT_TOKEN_FEE`), `failed` notification; the nonce stays
consumed (recorded on the payout and its `payout_txs`). A reverted transaction is mined and
its gas is spent: the hot wallet paid it for the account's request, so the account pays
it back, as for a confirmed payout (found by a tester: a native payout to a contract that
refuses value reverted for free, again and again, and the hot wallet's gas left unledgered).

Invariant: the compare-and-set makes every step here happen at most once per payout; a
second call finds the payout final and does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import asyncpg

from payflow.chain.payouts.holds import SQL, payout_event
from payflow.chain.payouts.records import (
    TOPIC_PAYOUT_NOTIFICATION,
    PayoutStatus,
    fee_event_id,
    withdrawal_event_id,
)
from payflow.config import Settings
from payflow.db import Connection
from payflow.db.tx import transaction
from payflow.ledger.posting import post_within
from payflow.ledger.records import EventType
from payflow.ledger.states import SQL as LEDGER_SQL
from payflow.money import add, from_base_units
from payflow.outbox.writer import enqueue


@dataclass(frozen=True, slots=True)
class Landed:
    """The receipt of the payout transaction that landed."""

    tx_hash: str
    status: int  # 1 success, 0 reverted
    block_number: int
    block_hash: str
    fee_wei: int  # gasUsed x effectiveGasPrice


def paid_fee(payout: Any, landed: Landed) -> Decimal:
    """The fee charged to the account: the gas paid (native) or the held token fee."""
    if payout["contract"] is None:
        return from_base_units(landed.fee_wei, int(payout["decimals"]))
    fee: Decimal = payout["fee_hold"]
    return fee


async def _record_and_post(
    conn: Connection, event_id: str, payout: Any, amount: Decimal, event_type: EventType
) -> None:
    await conn.execute(
        LEDGER_SQL["insert_event"],
        event_id,
        payout["account_id"],
        amount,
        event_type.value,
        payout["trace_id"],
    )
    await post_within(conn, event_id, consumes_hold=True)


async def settle(
    pool: asyncpg.Pool, settings: Settings, payout_id: Any, landed: Landed
) -> str | None:
    """Post or void a final payout; the new status, or None when it was already final."""
    async with pool.acquire() as conn, transaction(conn, settings):
        payout = await conn.fetchrow(SQL["get_payout"], payout_id)
        assert payout is not None
        target = PayoutStatus.CONFIRMED if landed.status == 1 else PayoutStatus.FAILED
        fee = paid_fee(payout, landed)  # spent whether the transaction succeeded or not
        row = await conn.fetchrow(
            SQL["finalize_payout"],
            payout_id,
            target.value,
            landed.tx_hash,
            landed.status,
            landed.block_number,
            landed.block_hash,
            fee,
            None
            if landed.status == 1
            else "reverted on chain: the amount is released, the network fee paid is charged",
        )
        if row is None:
            return None
        await conn.execute(
            SQL["release_hold"], row["account_id"], add(row["amount"], row["fee_hold"])
        )
        if target is PayoutStatus.CONFIRMED:
            await _record_and_post(
                conn, withdrawal_event_id(row["id"]), row, row["amount"], EventType.WITHDRAWAL
            )
        if fee > 0:  # never above the fee held: the hold covered the gas at its ceiling
            await _record_and_post(
                conn, fee_event_id(row["id"]), row, fee, EventType.WITHDRAWAL_FEE
            )
        await enqueue_notification(conn, row)
        return target.value


async def enqueue_notification(conn: Connection, row: Any) -> None:
    """The notification of `row`'s current status, in the caller's transaction."""
    await enqueue(conn, TOPIC_PAYOUT_NOTIFICATION, payout_event(row), row["trace_id"])
