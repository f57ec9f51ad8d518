"""The console's money pages (GET): payments, accounts with their ledger entries, and
payment events with their posting outcome. Scoped like the API (see `pages.py`)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from payflow.api.db import connection
from payflow.api.routing import api_router
from payflow.db.queries import load_queries
from payflow.ledger.history import counterparty_legs, transfer_legs
from payflow.ledger.posting import posting_key
from payflow.payments.finalize import credit_event_id
from payflow.webhooks.attempts import attempts_of

from .pages import Live, _choice, _page_rows, _time, _uncursor, _uuid
from .web import ConsoleError, page, scope, state

SQL = load_queries("payflow.console")
router = api_router(prefix="/console", include_in_schema=False)
PAYMENT_STATUSES = ("pending", "succeeded", "failed")
EVENT_STATUSES = ("pending", "enqueued", "processing", "confirmed", "failed")
# `accounts` amount columns shown everywhere; any OTHER amount column of the table (other
# issues add pending incoming, held, available) is shown after them, whatever its name.
ACCOUNT_BASE_AMOUNTS = frozenset({"balance", "initial_balance"})


@router.get("/payments", response_class=HTMLResponse)
async def payments(
    request: Request,
    session: Live,
    status: str | None = None,
    created_from: str | None = None,
    created_to: str | None = None,
    merchant: str | None = None,
    cursor: str | None = None,
) -> HTMLResponse:
    """Payments newest first; filters by status, time and (admin) merchant; cursor pages."""
    st = state(request)
    chosen = _choice(status, PAYMENT_STATUSES, "status")
    merchant_id = _uuid(merchant, "merchant") if session.merchant.is_admin else None
    who = scope(session) or merchant_id
    after_at, after_id = _uncursor(cursor)
    size = st.settings.console_page_size
    async with connection(st.pool) as conn:
        rows = await conn.fetch(
            SQL["list_payments"],
            who,
            chosen,
            _time(created_from, "from"),
            _time(created_to, "to"),
            after_at,
            _uuid(after_id, "cursor") if after_id else None,
            size + 1,
        )
    rows, next_cursor = _page_rows(rows, size, "id")
    filters = {
        "status": chosen or "",
        "created_from": created_from or "",
        "created_to": created_to or "",
        "merchant": merchant or "",
    }
    return page(
        request,
        "payments.html",
        session,
        rows=rows,
        next_cursor=next_cursor,
        filters=filters,
        statuses=PAYMENT_STATUSES,
    )


@router.get("/payments/{payment_id}", response_class=HTMLResponse)
async def payment_detail(request: Request, session: Live, payment_id: str) -> HTMLResponse:
    """One payment's timeline: created, charged, finalized, credited, webhook attempts."""
    st = state(request)
    pid = _uuid(payment_id, "payment id")
    async with connection(st.pool) as conn:
        payment = await conn.fetchrow(SQL["get_payment"], pid, scope(session))
        if payment is None:
            raise ConsoleError(404, "There is no such payment.")
        charges = await conn.fetch(SQL["charge_attempts_of_payment"], pid)
        credit = await conn.fetchrow(SQL["event_with_posting"], credit_event_id(payment["id"]))
        attempts = await attempts_of(conn, payment["id"])
    steps: list[tuple[datetime, str, str]] = [(payment["created_at"], "created", "")]
    for c in charges:
        steps.append((c["claimed_at"], "charge claimed", f"attempt {c['attempt']}"))
        if c["answered_at"] is not None:
            steps.append((c["answered_at"], "charged", f"gateway answered: {c['state']}"))
        elif c["state"] == "needs_review":
            steps.append((c["claimed_at"], "charge needs review", c["reason"]))
    if payment["processed_at"] is not None:
        steps.append((payment["processed_at"], "finalized", payment["status"]))
    if credit is not None and credit["posted_at"] is not None:
        steps.append((credit["posted_at"], "credited", f"ledger event {credit['event_id']}"))
    for a in attempts:
        answer = f"HTTP {a.http_status}" if a.http_status is not None else "no HTTP answer"
        detail = f"{answer}; {a.error}" if a.error else answer
        steps.append((a.attempted_at, f"webhook attempt {a.attempt}", detail))
    if payment["webhook_delivered_at"] is not None:
        # Set in the attempt's transaction just before its log row: show it after it.
        delivered = max([payment["webhook_delivered_at"], *(a.attempted_at for a in attempts)])
        steps.append((delivered, "webhook delivered", ""))
    if payment["webhook_dead_at"] is not None:
        steps.append((payment["webhook_dead_at"], "webhook dead-lettered", "see the DLQ"))
    steps.sort(key=lambda s: s[0])
    return page(
        request,
        "payment.html",
        session,
        payment=payment,
        steps=steps,
        credit=credit,
        attempts=attempts,
    )


def _extras(row: Any) -> dict[str, Decimal]:
    """The row's amount columns beyond balance and opening balance, in table order."""
    return {
        name: value
        for name, value in row.items()
        if isinstance(value, Decimal) and name not in ACCOUNT_BASE_AMOUNTS
    }


@router.get("/accounts", response_class=HTMLResponse)
async def accounts(request: Request, session: Live, after: str | None = None) -> HTMLResponse:
    """Accounts with balance (and pending incoming / held / available where they exist)."""
    st = state(request)
    size = st.settings.console_page_size
    async with connection(st.pool) as conn:
        rows = await conn.fetch(
            SQL["list_accounts"], scope(session), _uuid(after, "cursor"), size + 1
        )
    more = len(rows) > size
    rows = rows[:size]
    return page(
        request,
        "accounts.html",
        session,
        rows=[(r, _extras(r)) for r in rows],
        extras=list(_extras(rows[0])) if rows else [],
        next_after=str(rows[-1]["id"]) if more else None,
    )


@router.get("/accounts/{account_id}", response_class=HTMLResponse)
async def account_detail(
    request: Request, session: Live, account_id: str, before: str | None = None
) -> HTMLResponse:
    """One account and its ledger entries with balance_after, newest first, each with the
    other side of its posting (the system account its counterparty leg is on), and its
    transfers (an opening balance, operator adjustments) with their other side."""
    st = state(request)
    size = st.settings.console_page_size
    async with connection(st.pool) as conn:
        account = await conn.fetchrow(
            SQL["get_account"], _uuid(account_id, "account id"), scope(session)
        )
        if account is None:
            raise ConsoleError(404, "There is no such account.")
        cursor = int(before) if before and before.isdigit() and len(before) <= 18 else None
        entries = await conn.fetch(SQL["ledger_entries"], account["id"], cursor, size + 1)
        more = len(entries) > size
        entries = entries[:size]
        others = await counterparty_legs(conn, [e["source_event_id"] for e in entries])
        transfers = await transfer_legs(conn, account["id"], size)
    return page(
        request,
        "account.html",
        session,
        account=account,
        extras=_extras(account),
        entries=entries,
        others=others,
        transfers=transfers,
        next_before=entries[-1]["id"] if more else None,
    )


@router.get("/events", response_class=HTMLResponse)
async def events(
    request: Request, session: Live, status: str | None = None, cursor: str | None = None
) -> HTMLResponse:
    """Payment events (ledger work) newest first, with status and posting outcome."""
    st = state(request)
    chosen = _choice(status, EVENT_STATUSES, "status")
    after_at, after_id = _uncursor(cursor)
    size = st.settings.console_page_size
    async with connection(st.pool) as conn:
        rows = await conn.fetch(
            SQL["list_events"], scope(session), chosen, after_at, after_id, size + 1
        )
        rows, next_cursor = _page_rows(rows, size, "event_id")
        keys = [posting_key(r["event_id"]) for r in rows]
        records = await conn.fetch(SQL["posting_records"], keys)
    outcomes = {r["event_id"]: r["outcome"] for r in records}
    return page(
        request,
        "events.html",
        session,
        rows=rows,
        outcomes=outcomes,
        status=chosen or "",
        statuses=EVENT_STATUSES,
        next_cursor=next_cursor,
    )


@router.get("/events/{event_id:path}", response_class=HTMLResponse)
async def event_detail(request: Request, session: Live, event_id: str) -> HTMLResponse:
    """One event: status, retries, last error, its posting record and both sides of its
    posting (the customer's ledger entry and the counterparty leg)."""
    st = state(request)
    async with connection(st.pool) as conn:
        event = await conn.fetchrow(SQL["get_event"], event_id, scope(session))
        if event is None:
            raise ConsoleError(404, "There is no such event.")
        records = await conn.fetch(SQL["posting_records"], [posting_key(event_id)])
        entries = await conn.fetch(SQL["ledger_entries_of_event"], event_id)
        others = (await counterparty_legs(conn, [event_id])).get(event_id, [])
    return page(
        request,
        "event.html",
        session,
        event=event,
        record=records[0] if records else None,
        entries=entries,
        others=others,
    )
