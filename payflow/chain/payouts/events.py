"""A payout's events in its merchant's stream (`payflow.webhooks.record_event`).

`payout.held` when it is placed (funds held), `payout.sent` when a node first accepts its
transaction, `payout.confirmed` / `payout.failed` when it is final (or voided by an
operator). The merchant is the owner of the payout's account. Subject: the payout's id, so
each state is recorded once per payout, however often its transaction is retried (a
payout re-signed and accepted again is still sent once). The caller owns the
transaction: the one of the compare-and-set that moved the payout.
"""

from __future__ import annotations

from typing import Any

from payflow.chain.payouts.records import PayoutStatus
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.money import format_at_scale
from payflow.webhooks import EventKind, record_event

SQL = load_queries("payflow.chain.payouts")

KINDS = {
    PayoutStatus.HELD: EventKind.PAYOUT_HELD,
    PayoutStatus.SENT: EventKind.PAYOUT_SENT,
    PayoutStatus.CONFIRMED: EventKind.PAYOUT_CONFIRMED,
    PayoutStatus.FAILED: EventKind.PAYOUT_FAILED,
}


async def record_payout_event(
    conn: Connection, row: Any, status: PayoutStatus, *, tx_hash: str | None = None
) -> str | None:
    """Record the event of `row` (a `payouts` row) reaching `status`, in the caller's
    transaction; the event id, or None (recorded already, no merchant owns the account,
    or a status that is no event: signed).

    `tx_hash`: the transaction the node accepted (sent); otherwise the landed one. Amounts
    (`amount`, `fee_held`, and once final `fee_paid`) are strings at the asset's scale."""
    kind = KINDS.get(status)
    if kind is None:
        return None
    facts = await conn.fetchrow(SQL["payout_event_facts"], row["account_id"])
    if facts is None or facts["merchant_id"] is None:
        return None
    scale = int(facts["scale"])
    fee_paid = row["fee_paid"] if status in (PayoutStatus.CONFIRMED, PayoutStatus.FAILED) else None
    data: dict[str, Any] = {
        "payout_id": str(row["id"]),
        "status": status.value,
        "account_id": str(row["account_id"]),
        "asset": row["asset"],
        "amount": format_at_scale(row["amount"], scale),
        "fee_held": format_at_scale(row["fee_hold"], scale),
        "fee_paid": None if fee_paid is None else format_at_scale(fee_paid, scale),
        "chain": row["chain"],
        "to_address": row["to_address"],
        "contract": row["contract"],
        "tx_hash": tx_hash or row["landed_tx_hash"],
        "block_number": row["block_number"],
        "failure": row["failure"],
    }
    return await record_event(conn, facts["merchant_id"], kind, str(row["id"]), data)
