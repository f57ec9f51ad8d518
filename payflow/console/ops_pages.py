"""The console's operator pages (GET, admin only): dead letters, unmatched provider
events, alerts and jobs. Their forms (Replay, Acknowledge, Run now) are in `actions.py`."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import HTMLResponse

from payflow.alerts.store import AlertStore
from payflow.api.db import connection
from payflow.api.routing import api_router
from payflow.db.queries import load_queries
from payflow.dlq import get_dead_letter, list_dead_letters
from payflow.errors import NotFound
from payflow.ops.jobs_cli import job_overview

from .pages import Live, _page_rows, _uncursor
from .web import ConsoleError, page, require_admin, state

SQL = load_queries("payflow.console")
router = api_router(prefix="/console", include_in_schema=False)


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
    rows = await AlertStore(st.pool, st.settings.alerts, database=st.settings.database).list(
        include_resolved=True, limit=200
    )
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
