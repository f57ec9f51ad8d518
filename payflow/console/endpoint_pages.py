"""The console's webhook endpoint pages: a merchant lists, creates, rotates, disables and
enables its endpoints, reads each one's deliveries (every attempt) and redelivers an
event; an admin sees every merchant's. Scoped like the API: another merchant's endpoint
is the unknown-id 404. A secret is shown once, on the page that answers the create or
the rotation. An auto-disabled endpoint carries its notice."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import Request
from fastapi.responses import HTMLResponse, Response

from payflow.api.auth import new_webhook_secret
from payflow.api.checks import canonical_uuid_text
from payflow.api.db import connection
from payflow.api.routing import api_router
from payflow.db.tx import transaction
from payflow.errors import BadInput, Conflict, NotFound
from payflow.webhooks.endpoints import (
    Scope,
    attempts_by_delivery,
    checked_description,
    create_endpoint,
    deliveries_of_endpoint,
    get_endpoint,
    list_endpoints,
    redeliver,
    rotate_secret,
    update_endpoint,
    valid_events,
)
from payflow.webhooks.ssrf import check_webhook_url

from .pages import Live
from .sessions import Session
from .web import ConsoleError, check_csrf, page, redirect, state

router = api_router(prefix="/console", include_in_schema=False)
DELIVERIES_SHOWN = 50


def _scope(session: Session) -> Scope:
    return Scope(session.merchant.id, session.merchant.is_admin)


def _endpoint_id(raw: str) -> UUID:
    try:
        return UUID(str(canonical_uuid_text(raw)))
    except ValueError:
        raise ConsoleError(404, "There is no such webhook endpoint.") from None


async def _endpoint_page(
    request: Request,
    session: Session,
    endpoint_id: UUID,
    code: int = 200,
    **extra: Any,
) -> HTMLResponse:
    st = state(request)
    async with connection(st.pool) as conn:
        try:
            row = await get_endpoint(conn, _scope(session), endpoint_id)
        except NotFound:
            raise ConsoleError(404, "There is no such webhook endpoint.") from None
        deliveries = await deliveries_of_endpoint(
            conn, _scope(session), endpoint_id, DELIVERIES_SHOWN, None
        )
        attempts = await attempts_by_delivery(conn, [int(d["id"]) for d in deliveries])
    return page(
        request,
        "endpoint.html",
        session,
        code,
        row=row,
        deliveries=deliveries,
        attempts=attempts,
        secret=extra.get("secret"),
        message=extra.get("message"),
    )


@router.get("/webhook-endpoints", response_class=HTMLResponse)
async def endpoints(request: Request, session: Live) -> HTMLResponse:
    """The endpoints in scope, oldest first, and the create form."""
    return await _list_page(request, session)


async def _list_page(
    request: Request, session: Session, code: int = 200, message: str | None = None
) -> HTMLResponse:
    st = state(request)
    async with connection(st.pool) as conn:
        rows = await list_endpoints(conn, _scope(session), 200)
    return page(request, "endpoints.html", session, code, rows=rows, message=message)


@router.post("/webhook-endpoints", response_class=HTMLResponse)
async def create(request: Request, session: Live) -> Response:
    """Create an endpoint of the signed-in merchant; the page answering it shows the
    secret once. Bad input redraws the list with the reason (400)."""
    form = await check_csrf(request, session)
    st = state(request)
    url = form.get("url", "").strip()
    raw_events = [e.strip() for e in form.get("events", "*").split(",") if e.strip()]
    try:
        check_webhook_url(url, st.settings.webhook_allow_hosts, st.settings.webhook_nat64_prefixes)
        events = valid_events(raw_events)
        description = checked_description(form.get("description", "").strip())
    except BadInput as error:
        return await _list_page(request, session, 400, str(error))
    try:
        async with connection(st.pool) as conn, transaction(conn, st.settings):
            row = await create_endpoint(
                conn,
                session.merchant.id,
                url=url,
                events=events,
                secret=new_webhook_secret(),
                description=description,
            )
    except Conflict as error:
        return await _list_page(request, session, 409, f"Not created: {error}.")
    return await _endpoint_page(request, session, row["id"], 201, secret=row["secret"])


@router.get("/webhook-endpoints/{endpoint_id}", response_class=HTMLResponse)
async def endpoint(request: Request, session: Live, endpoint_id: str) -> HTMLResponse:
    """One endpoint: its settings, its notice when auto-disabled, its deliveries."""
    return await _endpoint_page(request, session, _endpoint_id(endpoint_id))


@router.post("/webhook-endpoints/{endpoint_id}/rotate", response_class=HTMLResponse)
async def rotate(request: Request, session: Live, endpoint_id: str) -> Response:
    """A new secret, shown once; the old one signs too for the overlap window."""
    await check_csrf(request, session)
    st = state(request)
    ident = _endpoint_id(endpoint_id)
    async with connection(st.pool) as conn, transaction(conn, st.settings):
        try:
            row = await rotate_secret(
                conn,
                _scope(session),
                ident,
                new_webhook_secret(),
                st.settings.webhooks.webhook_endpoint_rotation_overlap_s,
            )
        except NotFound:
            raise ConsoleError(404, "There is no such webhook endpoint.") from None
    return await _endpoint_page(request, session, ident, secret=row["secret"])


@router.post("/webhook-endpoints/{endpoint_id}/enabled")
async def set_enabled(request: Request, session: Live, endpoint_id: str) -> Response:
    """Disable (`enabled=false`) or enable (`enabled=true`) the endpoint."""
    form = await check_csrf(request, session)
    st = state(request)
    ident = _endpoint_id(endpoint_id)
    async with connection(st.pool) as conn, transaction(conn, st.settings):
        try:
            await update_endpoint(
                conn, _scope(session), ident, enabled=form.get("enabled") == "true"
            )
        except NotFound:
            raise ConsoleError(404, "There is no such webhook endpoint.") from None
    return redirect(f"/console/webhook-endpoints/{ident}")


@router.post("/webhook-endpoints/{endpoint_id}/redeliver", response_class=HTMLResponse)
async def redeliver_event(request: Request, session: Live, endpoint_id: str) -> Response:
    """Send one event again to this endpoint (same webhook-id), audited as
    `console:key:<the session's API key id>`."""
    form = await check_csrf(request, session)
    st = state(request)
    ident = _endpoint_id(endpoint_id)
    event_id = form.get("event_id", "").strip()[:200]
    who = f"console:key:{session.merchant.key_id}"
    try:
        async with connection(st.pool) as conn, transaction(conn, st.settings):
            await redeliver(conn, _scope(session), event_id, who, ident)
    except NotFound:
        raise ConsoleError(404, "There is no such event or webhook endpoint.") from None
    except BadInput as error:
        return await _endpoint_page(request, session, ident, 400, message=str(error))
    except Conflict as error:
        return await _endpoint_page(request, session, ident, 409, message=f"Not sent: {error}.")
    return await _endpoint_page(request, session, ident, message=f"{event_id} sent again.")
