"""The console's forms (POST): sign-in, sign-out, DLQ replay, alert acknowledgement and
running a job now. Every POST but sign-in needs the session's CSRF token; sign-in needs
the token of its own signed pre-session cookie. Nothing here moves money except the
audited DLQ replay (`payflow.ops.dlq_replay.replay_dead_letter`, the function `payflow dlq
replay` calls)."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import HTMLResponse, Response

from payflow.alerts.build import build_alert_sink
from payflow.alerts.store import AlertStore
from payflow.api.routing import api_router
from payflow.dlq import get_dead_letter
from payflow.errors import BadInput, Conflict, NotFound
from payflow.jobs.spec import JobContext
from payflow.ops.dlq_replay import replay_dead_letter
from payflow.ops.jobs_cli import job_overview
from payflow.ops.scheduler import JOBS, run_job

from .ops_pages import dlq_number
from .pages import Live
from .sessions import (
    COOKIE,
    PRE_COOKIE,
    PRE_SESSION_MAX_AGE_S,
    SignInRefused,
    clear_cookie,
    client_address,
    session_of,
    set_cookie,
    sign_in,
    sign_out,
    signin_token,
    tokens_match,
)
from .web import ConsoleError, check_csrf, page, redirect, require_admin, state

router = api_router(prefix="/console", include_in_schema=False)
MAX_REASON = 500


def signin_page(request: Request, status: int = 200, error: str | None = None) -> Response:
    """The sign-in form with a CSRF token bound to a signed pre-session cookie."""
    settings = state(request).settings
    token, cookie = signin_token(request, settings)
    response = page(request, "signin.html", None, code=status, csrf=token, error=error)
    if cookie is not None:
        set_cookie(response, request, settings.console, PRE_COOKIE, cookie, PRE_SESSION_MAX_AGE_S)
    return response


@router.get("/signin", response_class=HTMLResponse)
async def signin_form(request: Request) -> Response:
    """The sign-in page (a signed-in browser goes straight to the overview)."""
    st = state(request)
    if await session_of(st.pool, st.settings, request.cookies.get(COOKIE)) is not None:
        return redirect("/console")
    return signin_page(request)


@router.post("/signin")
async def signin(request: Request) -> Response:
    """Exchange an API key for a session cookie; 401 for a bad key, 429 when this
    address failed too often, 403 without the form's CSRF token."""
    st = state(request)
    form = await request.form()
    presented = form.get("csrf_token")
    expected, fresh = signin_token(request, st.settings)
    if fresh is not None or not isinstance(presented, str) or not tokens_match(expected, presented):
        return signin_page(request, 403, "The sign-in form expired. Please try again.")
    api_key = form.get("api_key")
    try:
        cookie, _merchant = await sign_in(
            st.pool,
            st.redis,
            st.settings,
            api_key if isinstance(api_key, str) else "",
            client_address(request),
        )
    except SignInRefused as refused:
        return signin_page(request, refused.status, refused.message)
    response = redirect("/console")
    set_cookie(
        response,
        request,
        st.settings.console,
        COOKIE,
        cookie,
        int(st.settings.console_session_ttl_s),
    )
    clear_cookie(response, request, st.settings.console, PRE_COOKIE)
    return response


@router.post("/signout")
async def signout(request: Request, session: Live) -> Response:
    """End the session server-side and drop the cookie (a read key's session too)."""
    await check_csrf(request, session, writes=False)
    st = state(request)
    await sign_out(st.pool, session)
    response = redirect("/console/signin")
    clear_cookie(response, request, st.settings.console, COOKIE)
    return response


@router.post("/dlq/{dlq_id}/replay", response_class=HTMLResponse)
async def dlq_replay(request: Request, session: Live, dlq_id: str) -> Response:
    """Replay one dead letter with a reason, as `console:<merchant name>`; a second
    replay is refused (409) with the resolution already recorded."""
    require_admin(session)
    form = await check_csrf(request, session)
    st = state(request)
    reason = form.get("reason", "").strip()
    number = dlq_number(dlq_id)
    try:
        row = await get_dead_letter(st.pool, number)
    except NotFound as exc:
        raise ConsoleError(404, "There is no such dead letter.") from exc
    if not reason:
        return page(
            request, "dlq_one.html", session, 400, row=row, message="Give a reason for the replay."
        )
    try:
        await replay_dead_letter(
            st.pool,
            st.settings.database,
            number,
            operator=f"console:{session.merchant.name}",
            reason=reason[:MAX_REASON],
        )
    except Conflict:
        row = await get_dead_letter(st.pool, number)
        return page(
            request,
            "dlq_one.html",
            session,
            409,
            row=row,
            message=f"Already replayed by {row.resolved_by}: nothing was done this time.",
        )
    except BadInput as exc:
        return page(request, "dlq_one.html", session, 400, row=row, message=str(exc))
    return redirect(f"/console/dlq/{number}")


@router.post("/alerts/ack")
async def alert_ack(request: Request, session: Live) -> Response:
    """Acknowledge one open alert as `console:<merchant name>`."""
    require_admin(session)
    form = await check_csrf(request, session)
    st = state(request)
    key = form.get("key", "")
    acked = await AlertStore(
        st.pool, st.settings.alerts, database=st.settings.database
    ).acknowledge(key, f"console:{session.merchant.name}")
    if acked is None:
        raise ConsoleError(404, "That alert is not open (any more).")
    return redirect("/console/alerts")


@router.post("/jobs/{name}/run", response_class=HTMLResponse)
async def job_run(request: Request, session: Live, name: str) -> Response:
    """Run one registered job now (recorded in job_runs like any run) and show its result."""
    require_admin(session)
    await check_csrf(request, session)
    if name not in JOBS:
        raise ConsoleError(404, "There is no such job.")
    st = state(request)
    ctx = JobContext(
        st.pool,
        st.settings,
        build_alert_sink(st.settings.alerts, st.pool, database=st.settings.database),
        st.redis,
    )
    run = await run_job(ctx, name)
    if run is None:
        message = f"{name}: skipped, another replica is running it right now."
    else:
        message = f"{name}: {run.result.outcome} {run.result.summary}".rstrip()
    rows = await job_overview(st.pool, st.settings)
    return page(request, "jobs.html", session, rows=rows, message=message)
