"""The console's API-key page: `/console/api-keys` lists the merchant's keys (an admin's:
every merchant's), creates a key for the signed-in merchant (the key is shown once, in
the answer to that form, never again) and revokes one. A read key's session sees the page;
its forms are refused by `web.check_csrf` (403).

Keys are `payflow.api.keys`'s: the same checks, the same refusal to revoke a merchant's
last active write key, the same records. Revoking the key a session signed in with ends
that session (its next page is the sign-in form)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from fastapi import Request
from fastapi.responses import HTMLResponse, Response

from payflow.api.auth import forget_key
from payflow.api.checks import canonical_uuid_text
from payflow.api.db import connection
from payflow.api.keys import ApiKey, checked_expiry, create_key, get_key, list_keys, revoke_key
from payflow.api.routing import api_router
from payflow.db.tx import transaction
from payflow.errors import BadInput, Conflict, NotFound

from .pages import Live
from .sessions import Session
from .web import ConsoleError, check_csrf, page, redirect, scope, state

router = api_router(prefix="/console", include_in_schema=False)
NO_SUCH_KEY = "There is no such API key."


async def _render(
    request: Request,
    session: Session,
    code: int = 200,
    *,
    message: str | None = None,
    created: tuple[ApiKey, str] | None = None,
) -> HTMLResponse:
    st = state(request)
    async with connection(st.pool) as conn:
        keys = await list_keys(conn, scope(session))
    return page(
        request,
        "api_keys.html",
        session,
        code,
        keys=keys,
        message=message,
        created=created,
        cache_seconds=f"{st.settings.api_auth_cache_seconds:g}",
    )


@router.get("/api-keys", response_class=HTMLResponse)
async def api_keys(request: Request, session: Live) -> HTMLResponse:
    """The keys in scope, revoked and expired ones included, and the create form."""
    return await _render(request, session)


def _expiry(text: str) -> datetime | None:
    """The form's expiry (`2027-01-01T10:00`, UTC unless it names an offset) or None."""
    text = text.strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadInput("The expiry is a date and time such as 2027-01-01T10:00 (UTC).") from None
    return checked_expiry(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


@router.post("/api-keys", response_class=HTMLResponse)
async def api_key_create(request: Request, session: Live) -> HTMLResponse:
    """Create a key for the signed-in merchant and show it in this answer only (the
    page is `Cache-Control: no-store` like every console page)."""
    form = await check_csrf(request, session)
    st = state(request)
    try:
        expires_at = _expiry(form.get("expires_at", ""))
        async with connection(st.pool) as conn, transaction(conn, st.settings):
            created = await create_key(
                conn,
                session.merchant.id,
                form.get("name", ""),
                form.get("scope", ""),
                expires_at,
            )
    except BadInput as error:
        return await _render(request, session, 422, message=str(error))
    except Conflict as error:
        return await _render(request, session, 409, message=f"Not created: {error}.")
    return await _render(request, session, 201, created=created)


def _key_id(raw: str) -> UUID:
    try:
        return UUID(str(canonical_uuid_text(raw)))
    except ValueError:
        raise ConsoleError(404, NO_SUCH_KEY) from None


@router.post("/api-keys/{key_id}/revoke", response_class=HTMLResponse)
async def api_key_revoke(request: Request, session: Live, key_id: str) -> Response:
    """Revoke a key in scope (an admin: any merchant's); 409 for its merchant's last
    active write key, 404 outside the scope. Revoking twice changes nothing."""
    await check_csrf(request, session)
    st = state(request)
    number = _key_id(key_id)
    try:
        async with connection(st.pool) as conn, transaction(conn, st.settings):
            found = await get_key(conn, number, scope(session))
            _, digest = await revoke_key(conn, number, found.merchant_id)
    except NotFound:
        raise ConsoleError(404, NO_SUCH_KEY) from None
    except Conflict as error:
        return await _render(request, session, 409, message=f"Not revoked: {error}.")
    if digest is not None:
        forget_key(st, digest)
    return redirect("/console/api-keys")
