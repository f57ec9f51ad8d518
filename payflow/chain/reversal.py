"""The compensating debit of a credited deposit that a deep reorg undid.

Only chains on a `confirmations:N` policy can need it: a reorg deeper than N removed a
transfer payflow had already credited. In one transaction, under the account's row
lock: the deposit moves credited → reversed (compare-and-set) and the debit
`reorg:<transfer id>` (event type `deposit_reversal`) is recorded with its outbox row,
for min(balance, amount). The remainder is the SHORTFALL: recorded on the deposit, posted
in the same transaction as payflow's loss (transfer `reorg_shortfall`, reference the
reversal's event id: reorg_loss -> custody, `moves.post_reorg_shortfall`), the account
frozen (no further withdrawals), and an alert raised. The balance never goes negative;
with the customer's debit (customer -> custody) the custody account is restored by the
whole reversed amount, which is what the chain no longer holds. The debit is posted
through `post_event` like every other event (a `deposit_reversal` applies to a frozen
account too). Should a concurrent debit have taken the funds before it posts (refused:
insufficient funds), the whole amount becomes the shortfall: the rest is posted as a
second shortfall transfer (reference `<event id>:refused`) and the account is frozen.
"""

from __future__ import annotations

from decimal import Decimal

import asyncpg
import structlog

from payflow.alerts import AlertSink, Severity
from payflow.chain.deposit_events import record_deposit_event
from payflow.chain.deposits import SQL
from payflow.config import DatabaseSettings
from payflow.db.tx import transaction
from payflow.ledger.accounts import asset_scale, record_and_announce, set_account_status
from payflow.ledger.moves import post_reorg_shortfall
from payflow.ledger.posting import post_event
from payflow.ledger.records import AccountStatus, EventType, Outcome
from payflow.money import EXACT, format_amount
from payflow.webhooks import EventKind

log = structlog.get_logger("payflow.chain.reversal")


def reversal_event_id(tid: str, generation: int = 0) -> str:
    """The idempotency key / event id of a deposit's compensating debit: `reorg:<tid>`,
    then `reorg:<tid>~<n>` for the reversal of its n-th re-credit (a transfer a reorg
    removed, the chain gave back, and a deeper reorg removed again)."""
    return f"reorg:{tid}" if generation == 0 else f"reorg:{tid}~{generation}"


async def reverse(
    pool: asyncpg.Pool, settings: DatabaseSettings, alerts: AlertSink, tid: str
) -> bool:
    """Reverse the credited deposit `tid`; False when it was not credited (any more).

    Invariant: at most one reversal per deposit (status CAS + the event id), the
    balance stays >= 0, and every unit not debited is recorded as the shortfall."""
    async with pool.acquire() as conn, transaction(conn, settings):
        deposit = await conn.fetchrow(SQL["deposit_for_reversal"], tid)
        if deposit is None:
            return False
        event_id = reversal_event_id(tid, int(deposit["generation"]))
        account = await conn.fetchrow(SQL["lock_account"], deposit["account_id"])
        assert account is not None
        amount: Decimal = deposit["amount"]
        debit = min(account["balance"], amount)
        shortfall = EXACT.subtract(amount, debit)
        marked = await conn.fetchval(
            SQL["mark_reversed"],
            tid,
            event_id if debit > 0 else None,
            shortfall if shortfall > 0 else None,
        )
        if marked is None:
            return False
        if debit > 0:
            await record_and_announce(
                conn,
                event_id=event_id,
                account_id=deposit["account_id"],
                amount=format_amount(debit),
                event_type=EventType.DEPOSIT_REVERSAL,
                scale=await asset_scale(conn, deposit["asset"]),
                trace_id=deposit["trace_id"] or event_id,
            )
        if shortfall > 0:
            await post_reorg_shortfall(conn, event_id, tid, shortfall)
            await set_account_status(conn, deposit["account_id"], AccountStatus.FROZEN)
        await record_deposit_event(conn, EventKind.DEPOSIT_REVERSED, tid, debited=debit)
    if debit > 0:
        result = await post_event(pool, settings, event_id)
        if result.outcome is not Outcome.SUCCESS:
            shortfall = amount
            async with pool.acquire() as conn, transaction(conn, settings):
                await conn.execute(SQL["set_shortfall"], tid, shortfall)
                # the debit that was to restore custody did not happen: the loss is it all
                await post_reorg_shortfall(conn, f"{event_id}:refused", tid, debit)
                await set_account_status(conn, deposit["account_id"], AccountStatus.FROZEN)
    log.error(
        "payflow.chain.reversed",
        transfer_id=tid,
        debited=format_amount(debit),
        shortfall=format_amount(shortfall),
    )
    if shortfall > 0:
        await alerts.fire(
            f"chain.reorg_shortfall:{tid}",
            Severity.CRITICAL,
            f"deposit {tid} was undone by a reorg after crediting; "
            f"{format_amount(shortfall)} {deposit['asset']} already spent; account frozen",
            details={
                "account_id": str(deposit["account_id"]),
                "shortfall": format_amount(shortfall),
                "transfer_id": tid,
            },
        )
    return True
