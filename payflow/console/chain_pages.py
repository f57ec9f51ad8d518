"""The console's chain pages (GET, read-only): deposits awaiting finality and their
reports, and payouts with the hot wallets' state as PostgreSQL knows it.

Scoped like the rest of the console: a deposit, report or payout belongs to the merchant
that owns its account; an admin's scope is every merchant, and anything outside the scope
is the same 404 page as an unknown id. No page here asks the node: confirmations are a
lower bound from the scanner's cursor, and wallet balances are `payflow wallet status`'s.
Nothing here can move money.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from payflow.api.db import connection
from payflow.api.routing import api_router
from payflow.chain.config import chain_configs
from payflow.chain.payouts.records import fee_event_id, withdrawal_event_id
from payflow.config import ChainSettings, PayoutSettings, SettingsError
from payflow.db.queries import load_queries
from payflow.money import from_base_units

from .pages import Live, _choice, _page_rows, _uncursor, _uuid
from .web import ConsoleError, amount, page, require_admin, scope, state

SQL = load_queries("payflow.console")
router = api_router(prefix="/console", include_in_schema=False)

# Deposit filter values: a status of `chain_deposits`, or `all`. The default (no filter)
# is `verified`: seen by the node, waiting for its block to be final.
DEPOSIT_STATUSES = ("verified", "orphaned", "credited", "reversed")
DEPOSIT_FILTERS = (*DEPOSIT_STATUSES, "all")
# Report filter values: `unverified` is pending + refuted (what an operator reviews).
REPORT_FILTERS = {
    "unverified": ["pending", "refuted"],
    "refuted": ["refuted"],
    "pending": ["pending"],
    "confirmed": ["confirmed"],
    "all": ["pending", "refuted", "confirmed"],
}
# Payout filter values: a status of `payouts`, or `open` (held, signed or sent).
PAYOUT_STATUSES = ("held", "signed", "sent", "confirmed", "failed")
PAYOUT_FILTERS = {"open": ["held", "signed", "sent"], **{s: [s] for s in PAYOUT_STATUSES}}


def _pick(value: str | None, allowed: tuple[str, ...], default: str) -> str:
    """The filter value chosen (`default` when none); 400 for anything else."""
    return _choice(value, allowed, "status") or default


def policies(settings: ChainSettings) -> dict[str, str]:
    """Each configured chain's finality policy as text (`finalized`, `confirmations:N`);
    a chain missing here has no RPC configured, so its deposits wait."""
    try:
        return {name: str(config.policy) for name, config in chain_configs(settings).items()}
    except SettingsError:
        return {}


def confirmations(block_number: int, cursor_block: int | None) -> int | None:
    """Blocks from the deposit's block up to the scanner's last walked block (a lower bound
    of its confirmations: the scanner walks behind head); None without a scanner cursor."""
    if cursor_block is None or cursor_block < block_number:
        return None
    return cursor_block - block_number + 1


@router.get("/deposits", response_class=HTMLResponse)
async def deposits(
    request: Request, session: Live, status: str | None = None, cursor: str | None = None
) -> HTMLResponse:
    """Chain deposits newest first: awaiting finality by default, or by status, or all."""
    st = state(request)
    chosen = _pick(status, DEPOSIT_FILTERS, "verified")
    after_at, after_id = _uncursor(cursor)
    size = st.settings.console_page_size
    async with connection(st.pool) as conn:
        rows = await conn.fetch(
            SQL["list_chain_deposits"],
            scope(session),
            None if chosen == "all" else chosen,
            after_at,
            after_id,
            size + 1,
        )
    rows, next_cursor = _page_rows(rows, size, "transfer_id")
    return page(
        request,
        "deposits.html",
        session,
        rows=[(r, confirmations(r["block_number"], r["cursor_block"])) for r in rows],
        status=chosen,
        filters=DEPOSIT_FILTERS,
        policies=policies(st.settings.chain),
        next_cursor=next_cursor,
    )


@router.get("/deposits/reports", response_class=HTMLResponse)
async def deposit_reports(
    request: Request, session: Live, status: str | None = None, cursor: str | None = None
) -> HTMLResponse:
    """Reports of transfers not (or not yet) verified: refuted ones with their reason and
    pending ones, newest first; every source. Admin only."""
    require_admin(session)
    st = state(request)
    chosen = _pick(status, tuple(REPORT_FILTERS), "unverified")
    after_at, after_id = _uncursor(cursor)
    if after_id is not None and not (after_id.isdigit() and len(after_id) <= 18):
        raise ConsoleError(400, "That page link is damaged; start from the first page.")
    size = st.settings.console_page_size
    async with connection(st.pool) as conn:
        rows = await conn.fetch(
            SQL["list_chain_reports"],
            REPORT_FILTERS[chosen],
            after_at,
            int(after_id) if after_id is not None else None,
            size + 1,
        )
    rows, next_cursor = _page_rows(rows, size, "id")
    return page(
        request,
        "deposit_reports.html",
        session,
        rows=rows,
        status=chosen,
        filters=list(REPORT_FILTERS),
        next_cursor=next_cursor,
    )


@router.get("/deposits/{transfer_id}", response_class=HTMLResponse)
async def deposit_detail(request: Request, session: Live, transfer_id: str) -> HTMLResponse:
    """One deposit: where the node showed it, its finality state, its credit (or
    reversal) and every report of the transfer, confirmed, pending or refuted."""
    st = state(request)
    async with connection(st.pool) as conn:
        deposit = await conn.fetchrow(SQL["get_chain_deposit"], transfer_id, scope(session))
        if deposit is None:
            raise ConsoleError(404, "There is no such deposit.")
        reports = await conn.fetch(
            SQL["reports_of_transfer"],
            deposit["transfer_id"],
            deposit["chain"],
            deposit["tx_hash"],
            scope(session),
        )
    return page(
        request,
        "deposit.html",
        session,
        deposit=deposit,
        reports=reports,
        confirmations=confirmations(deposit["block_number"], deposit["cursor_block"]),
        policy=policies(st.settings.chain).get(deposit["chain"]),
    )


@router.get("/payouts", response_class=HTMLResponse)
async def payouts(
    request: Request, session: Live, status: str | None = None, cursor: str | None = None
) -> HTMLResponse:
    """Payouts newest first, filtered by status (or open: not final yet); an admin also
    sees the hot wallets as PostgreSQL knows them (nonces, commitments, stuck, waiting)."""
    st = state(request)
    chosen = _pick(status, tuple(PAYOUT_FILTERS), "") or None
    after_at, after_id = _uncursor(cursor)
    size = st.settings.console_page_size
    wallets = None
    async with connection(st.pool) as conn:
        rows = await conn.fetch(
            SQL["list_payouts"],
            scope(session),
            PAYOUT_FILTERS[chosen] if chosen else None,
            after_at,
            _uuid(after_id, "cursor") if after_id else None,
            size + 1,
        )
        if session.merchant.is_admin and cursor is None:
            wallets = await hot_wallets(conn, st.settings.payouts)
    rows, next_cursor = _page_rows(rows, size, "id")
    return page(
        request,
        "payouts.html",
        session,
        rows=rows,
        status=chosen or "",
        filters=list(PAYOUT_FILTERS),
        wallets=wallets,
        next_cursor=next_cursor,
    )


async def hot_wallets(conn: Any, settings: PayoutSettings) -> dict[str, Any]:
    """What the database knows of the hot wallets: each wallet's next nonce and pending
    payouts, what its signed, unmined payouts still commit (amounts and gas at most), the
    transactions stuck longer than `PAYOUT_STUCK_AFTER_S` and the payouts that wait."""
    commitments = [
        (row, from_base_units(int(row["max_gas_wei"]), int(row["native_decimals"])))
        for row in await conn.fetch(SQL["hot_wallet_commitments"])
    ]
    return {
        "rows": await conn.fetch(SQL["hot_wallet_rows"]),
        "commitments": commitments,
        "stuck": await conn.fetch(SQL["stuck_payout_txs"], settings.payout_stuck_after_s),
        "waiting": await conn.fetch(SQL["waiting_payouts"]),
        "stuck_after_s": settings.payout_stuck_after_s,
    }


@router.get("/payouts/{payout_id}", response_class=HTMLResponse)
async def payout_detail(request: Request, session: Live, payout_id: str) -> HTMLResponse:
    """One payout: amounts and fees, where it goes, its nonce, every signed attempt (fee
    bumps included) and a timeline from the hold to the final state and its postings."""
    st = state(request)
    pid = _uuid(payout_id, "payout id")
    async with connection(st.pool) as conn:
        payout = await conn.fetchrow(SQL["get_payout"], pid, scope(session))
        if payout is None:
            raise ConsoleError(404, "There is no such payout.")
        attempts = await conn.fetch(SQL["payout_attempts"], pid)
        actions = await conn.fetch(SQL["payout_operator_actions"], pid)
        postings = await conn.fetch(
            SQL["events_with_posting"], [withdrawal_event_id(pid), fee_event_id(pid)]
        )
    return page(
        request,
        "payout.html",
        session,
        payout=payout,
        attempts=attempts,
        postings=postings,
        actions=actions,
        steps=payout_steps(payout, attempts, postings, actions),
    )


def payout_steps(
    payout: Any,
    attempts: list[Any],
    postings: list[Any],
    actions: Sequence[Any] = (),
) -> list[tuple[datetime, str, str]]:
    """The payout's timeline, oldest first: (when, what, detail); a stall and the
    operator actions (void, resign) included."""
    scale = int(payout["scale"])
    held = Decimal(payout["amount"]) + Decimal(payout["fee_hold"])
    steps: list[tuple[datetime, str, str]] = [
        (
            payout["created_at"],
            "held",
            f"{amount(held, scale)} {payout['asset']} (amount + fee at most)",
        )
    ]
    if payout["status"] == "held" and payout["wait_reason"]:
        steps.append((payout["updated_at"], "waiting", payout["wait_reason"]))
    if payout["signed_at"] is not None:
        steps.append(
            (payout["signed_at"], "signed", f"nonce {payout['nonce']} of {payout['hot_wallet']}")
        )
    for a in attempts:
        if a["attempt"] > 1:
            detail = f"{a['tx_hash']} replaces attempt {a['attempt'] - 1} (same nonce)"
            steps.append((a["created_at"], f"fee bump: attempt {a['attempt']}", detail))
        if a["broadcast_at"] is not None:
            steps.append((a["broadcast_at"], f"attempt {a['attempt']} broadcast", a["tx_hash"]))
    if payout["sent_at"] is not None:
        steps.append((payout["sent_at"], "sent", "the node accepted the transaction"))
    if payout.get("stall") is not None:
        steps.append(
            (payout["stalled_at"], f"stalled: {payout['stall']}", payout["stall_detail"] or "")
        )
    for act in actions:
        nonces = f"nonce {act['old_nonce']}" + (
            f" -> {act['new_nonce']}" if act["new_nonce"] is not None else ""
        )
        steps.append(
            (
                act["created_at"],
                f"operator {act['action']}",
                f"by {act['actor']}: {act['reason']} ({nonces})",
            )
        )
    if payout["finalized_at"] is not None:
        if payout["status"] == "confirmed":
            fee = payout["fee_paid"]
            detail = f"{payout['landed_tx_hash']} final; fee paid {amount(fee, scale)}"
        else:
            detail = payout["failure"] or "reverted on chain"
        steps.append((payout["finalized_at"], payout["status"], detail))
    for e in postings:
        if e["posted_at"] is not None:
            steps.append(
                (e["posted_at"], f"posted: {e['event_type']}", f"ledger event {e['event_id']}")
            )
    steps.sort(key=lambda s: s[0])
    return steps
