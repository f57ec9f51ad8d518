"""A chain deposit's events in its merchant's stream (`payflow.webhooks.record_event`).

`deposit.pending` when the node shows the transfer (verified, not final),
`deposit.credited` when it is final and credited, `deposit.reversed` when a deep reorg
undid a credit. The merchant is the owner of the deposit address's account (a deposit to
an account no merchant owns records nothing). Subjects: the transfer id for the first
round, `<transfer id>~<n>` for the n-th round after a reversal (the chain gave the
transfer back: pending and credited again), so every cause is recorded once however often
its transaction is retried. The caller owns the transaction (the one of the change).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.money import format_at_scale
from payflow.webhooks import EventKind, record_event

SQL = load_queries("payflow.chain")


def deposit_subject(tid: str, generation: int) -> str:
    """The subject of a deposit's events in round `generation` (0: the first)."""
    return tid if generation == 0 else f"{tid}~{generation}"


def _data(facts: Any, status: str, **amounts: Decimal | None) -> dict[str, Any]:
    scale = int(facts["scale"])
    data: dict[str, Any] = {
        "deposit_id": facts["transfer_id"],
        "status": status,
        "account_id": str(facts["account_id"]),
        "chain": facts["chain"],
        "tx_hash": facts["tx_hash"],
        "position": facts["position"],
        "address": facts["to_address"],
        "contract": facts["contract"],
        "asset": facts["asset"],
        "amount": format_at_scale(facts["amount"], scale),
        "block_number": facts["block_number"],
        "block_hash": facts["block_hash"],
    }
    for name, value in amounts.items():
        data[name] = None if value is None else format_at_scale(value, scale)
    return data


async def record_deposit_event(
    conn: Connection,
    kind: EventKind,
    tid: str,
    *,
    credited: Decimal | None = None,
    debited: Decimal | None = None,
) -> str | None:
    """Record `kind` (a `deposit.*` type) about deposit `tid` as it is now, in the caller's
    transaction; the event id, or None (recorded already, or no merchant owns the account).

    The round is the deposit's current generation (earlier credits a reorg reversed), so
    call it after the change: a pending after a re-inclusion and the credit after it share
    round n. `credited` (credited only): what reached the balance (less than the amount
    when a reversal's shortfall is recovered first); `debited` (reversed only): what the
    reversal took back (the rest is the `shortfall`). Amounts are rendered at the asset's
    scale."""
    facts = await conn.fetchrow(SQL["deposit_event_facts"], tid)
    if facts is None or facts["merchant_id"] is None:
        return None
    generation = int(facts["generation"])
    if kind is EventKind.DEPOSIT_PENDING:
        data = _data(facts, "pending")
    elif kind is EventKind.DEPOSIT_CREDITED:
        data = _data(facts, "credited", credited_amount=credited)
    elif kind is EventKind.DEPOSIT_REVERSED:
        data = _data(facts, "reversed", debited_amount=debited, shortfall=facts["shortfall"])
    else:
        raise ValueError(f"{kind} is not a deposit event")
    data["round"] = generation
    return await record_event(
        conn, facts["merchant_id"], kind, deposit_subject(tid, generation), data
    )
