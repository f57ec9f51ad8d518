"""The console's pages (GET): what each answers is in docs/console.md.

Every query is scoped like the API: an admin's scope is every merchant, a merchant's is
its own id, and anything outside it is the same 404 page as an unknown id.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any
from uuid import UUID

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse

from payflow.alerts.store import AlertStore
from payflow.api.checks import clean_text, utc_bound
from payflow.api.db import connection
from payflow.api.routing import api_router
from payflow.db.queries import load_queries
from payflow.dlq.records import get_dead_letter, list_dead_letters
from payflow.errors import NotFound
from payflow.ledger.posting import posting_key
from payflow.ops.jobs_cli import job_overview
from payflow.ops.status import collect_status
from payflow.payments.finalize import credit_event_id
from payflow.webhooks.attempts import attempts_of

from . import chart
from .sessions import Session
from .web import ConsoleError, current_session, page, require_admin, scope, state

SQL = load_queries("payflow.console")
router = api_router(prefix="/console", include_in_schema=False)
Live = Annotated[Session, Depends(current_session)]
PAYMENT_STATUSES = ("pending", "succeeded", "failed")
EVENT_STATUSES = ("pending", "enqueued", "processing", "confirmed", "failed")
# `accounts` amount columns shown everywhere; any OTHER amount column of the table (other
# issues add pending incoming, held, available) is shown after them, whatever its name.
ACCOUNT_BASE_AMOUNTS = frozenset({"balance", "initial_balance"})


def _cursor(created_at: datetime, key: object) -> str:
    raw = f"{created_at.isoformat()}|{key}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _page_rows(rows: list[Any], size: int, key: str) -> tuple[list[Any], str | None]:
    """The page's rows (fetched `size + 1`) and the cursor of the next page (None on the
    last page), keyed by `(created_at, row[key])`."""
    more = len(rows) > size
    rows = rows[:size]
    return rows, (_cursor(rows[-1]["created_at"], rows[-1][key]) if more else None)


def _uncursor(cursor: str | None) -> tuple[datetime | None, str | None]:
    """Inverse of `_cursor`; `ConsoleError` 400 for anything it did not produce. What the
    link decodes to is checked before it reaches SQL: an aware time within the stored
    range and a key PostgreSQL can hold (`payflow.api.checks`)."""
    if not cursor:
        return None, None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, key = raw.split("|", 1)
        moment = datetime.fromisoformat(at)
        if moment.tzinfo is None:
            raise ValueError("a cursor's time carries its offset")
        return utc_bound(moment), clean_text(key)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConsoleError(400, "That page link is damaged; start from the first page.") from exc


def _uuid(value: str | None, what: str) -> UUID | None:
    if not value:
        return None
    try:
        return UUID(value)
    except ValueError as exc:
        raise ConsoleError(400, f"{what} must be an id like 1b4e28ba-2fa1-11d2-883f-…") from exc


def _time(value: str | None, what: str) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        return utc_bound(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))
    except ValueError as exc:
        raise ConsoleError(
            400, f"{what} must be a date and time like 2026-11-30T21:00, between 1970 and 9998"
        ) from exc


def _choice(value: str | None, allowed: tuple[str, ...], what: str) -> str | None:
    if not value:
        return None
    if value not in allowed:
        raise ConsoleError(400, f"{what} must be one of: {', '.join(allowed)}")
    return value


@router.get("", response_class=HTMLResponse)
async def overview(request: Request, session: Live) -> HTMLResponse:
    """Is the money right, is it flowing, what is stuck (ops status for an admin)."""
    st = state(request)
    now = datetime.now(UTC)
    start = chart.window_start(now)
    async with connection(st.pool) as conn:
        rows = await conn.fetch(SQL["activity_per_minute"], scope(session), start)
        onchain = await conn.fetchrow(SQL["chain_counts"], scope(session))
    series = chart.bucket([dict(r) for r in rows], start)
    status = None
    if session.merchant.is_admin:
        status = await collect_status(st.pool, st.settings)
    return page(
        request,
        "overview.html",
        session,
        status=status,
        svg=chart.render(series, start),
        totals=chart.totals(series),
        onchain=onchain,
    )


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
    """One account and its ledger entries with balance_after, newest first."""
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
    return page(
        request,
        "account.html",
        session,
        account=account,
        extras=_extras(account),
        entries=entries,
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
    """One event: status, retries, last error, its posting record and ledger entries."""
    st = state(request)
    async with connection(st.pool) as conn:
        event = await conn.fetchrow(SQL["get_event"], event_id, scope(session))
        if event is None:
            raise ConsoleError(404, "There is no such event.")
        records = await conn.fetch(SQL["posting_records"], [posting_key(event_id)])
        entries = await conn.fetch(SQL["ledger_entries_of_event"], event_id)
    return page(
        request,
        "event.html",
        session,
        event=event,
        record=records[0] if records else None,
        entries=entries,
    )


@router.get("/dlq", response_class=HTMLResponse)
async def dlq(request: Request, session: Live, resolved: str | None = None) -> HTMLResponse:
    """Dead letters, unresolved (or all), newest first. Admin only."""
    require_admin(session)
    rows = await list_dead_letters(state(request).pool, include_resolved=bool(resolved), limit=200)
    return page(request, "dlq.html", session, rows=rows, resolved=bool(resolved))


@router.get("/dlq/{dlq_id}", response_class=HTMLResponse)
async def dlq_detail(request: Request, session: Live, dlq_id: str) -> HTMLResponse:
    """One dead letter: payload, error, attempts, resolution; the Replay form. Admin only."""
    require_admin(session)
    try:
        row = await get_dead_letter(state(request).pool, dlq_number(dlq_id))
    except NotFound as exc:
        raise ConsoleError(404, "There is no such dead letter.") from exc
    return page(request, "dlq_one.html", session, row=row, message=None)


def dlq_number(raw: str) -> int:
    """A DLQ id from the URL; anything but a positive BIGINT is the unknown-id 404."""
    if not raw.isdigit() or len(raw) > 18:
        raise ConsoleError(404, "There is no such dead letter.")
    return int(raw)


@router.get("/unmatched", response_class=HTMLResponse)
async def unmatched(request: Request, session: Live, cursor: str | None = None) -> HTMLResponse:
    """Provider events that matched no deposit address or asset. Admin only."""
    require_admin(session)
    st = state(request)
    after_at, after_id = _uncursor(cursor)
    size = st.settings.console_page_size
    async with connection(st.pool) as conn:
        rows = await conn.fetch(SQL["list_unmatched"], after_at, after_id, size + 1)
    rows, next_cursor = _page_rows(rows, size, "event_id")
    return page(request, "unmatched.html", session, rows=rows, next_cursor=next_cursor)


@router.get("/unmatched/{event_id:path}", response_class=HTMLResponse)
async def unmatched_detail(request: Request, session: Live, event_id: str) -> HTMLResponse:
    """One unmatched event: its reason and the raw payload as escaped text. Admin only."""
    require_admin(session)
    async with connection(state(request).pool) as conn:
        row = await conn.fetchrow(SQL["get_unmatched"], event_id)
    if row is None:
        raise ConsoleError(404, "There is no such unmatched event.")
    raw = bytes(row["body"]).decode("utf-8", "replace") if row["body"] is not None else None
    return page(request, "unmatched_one.html", session, row=row, raw=raw)


@router.get("/alerts", response_class=HTMLResponse)
async def alerts(request: Request, session: Live) -> HTMLResponse:
    """Open and recently resolved alerts; open ones can be acknowledged. Admin only."""
    require_admin(session)
    st = state(request)
    rows = await AlertStore(st.pool, st.settings).list(include_resolved=True, limit=200)
    open_rows = [r for r in rows if r.resolved_at is None]
    closed = [r for r in rows if r.resolved_at is not None]
    return page(request, "alerts.html", session, open_rows=open_rows, closed=closed)


@router.get("/jobs", response_class=HTMLResponse)
async def jobs(request: Request, session: Live) -> HTMLResponse:
    """Every scheduled job with its last run; each can be run now. Admin only."""
    require_admin(session)
    st = state(request)
    rows = await job_overview(st.pool, st.settings)
    return page(request, "jobs.html", session, rows=rows, message=None)


@router.get("/{rest:path}", response_class=HTMLResponse)
async def unknown(request: Request, session: Live, rest: str) -> HTMLResponse:
    """Any other /console path: the same 404 page (registered last)."""
    raise ConsoleError(404, "There is no such page.")
