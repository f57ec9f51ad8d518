"""The console's pages (GET): what each answers is in docs/console.md.

Every query is scoped like the API: an admin's scope is every merchant, a merchant's is
its own id, and anything outside it is the same 404 page as an unknown id.

Here: the overview, the catch-all 404 (its router is included last), and what every
page family shares: the session dependency `Live`, the page cursors and the checks of
query parameters. The families: `money_pages.py` (payments, accounts, events),
`ops_pages.py` (DLQ, unmatched provider events, alerts, jobs) and `chain_pages.py`
(deposits, payouts).
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse

from payflow.api.checks import canonical_uuid_text, clean_text, utc_bound
from payflow.api.db import connection
from payflow.api.routing import api_router
from payflow.db.queries import load_queries
from payflow.ops.status import collect_status

from . import chart
from .sessions import Session
from .web import ConsoleError, current_session, page, scope, state

SQL = load_queries("payflow.console")
router = api_router(prefix="/console", include_in_schema=False)
Live = Annotated[Session, Depends(current_session)]


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
        return UUID(str(canonical_uuid_text(value)))
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


@router.get("/{rest:path}", response_class=HTMLResponse)
async def unknown(request: Request, session: Live, rest: str) -> HTMLResponse:
    """Any other /console path: the same 404 page (registered last)."""
    raise ConsoleError(404, "There is no such page.")
