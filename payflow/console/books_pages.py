"""The console's books page (GET, admin only): the trial balance per asset, read from the
double-entry journal by `payflow.ledger.history.trial_balance` in one snapshot."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import HTMLResponse

from payflow.api.db import connection
from payflow.api.routing import api_router
from payflow.ledger.history import trial_balance

from .pages import Live
from .web import page, require_admin, state

router = api_router(prefix="/console", include_in_schema=False)


@router.get("/books", response_class=HTMLResponse)
async def books(request: Request, session: Live) -> HTMLResponse:
    """Per asset: debits, credits and their difference over the whole journal, each system
    account with its balance on its normal side, and what customers are owed. Admin only
    (a merchant's session gets the unknown-page 404)."""
    require_admin(session)
    st = state(request)
    async with connection(st.pool) as conn:
        assets = await trial_balance(conn, st.settings)
    return page(request, "books.html", session, assets=assets)
