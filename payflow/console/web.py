"""The console's plumbing: templates, security headers, errors as pages, the session
dependency and the CSRF check. Routes live in `pages.py` (with `money_pages.py`,
`ops_pages.py`, `chain_pages.py`) and `actions.py`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, select_autoescape

from payflow.api.auth import KeyScope
from payflow.api.state import ApiState, api_state
from payflow.money import format_at_scale

from .sessions import COOKIE, Session, session_of, tokens_match

HERE = Path(__file__).parent
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}

NUL = "\x00"  # PostgreSQL text cannot hold it


class ConsoleError(Exception):
    """A request the console answers with an error page (`status`, a sentence for people)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SignInNeeded(Exception):
    """No live session: the browser is sent to the sign-in page."""


def amount(value: Decimal | None, scale: int | None) -> str:
    """An amount at its asset's scale (exact; `money.format_at_scale`); '-' for None."""
    if value is None:
        return "-"
    return format_at_scale(value, int(scale if scale is not None else 0))


def when(value: datetime | None) -> str:
    """A timestamp in UTC to the second; '-' for None."""
    if value is None:
        return "-"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def ago(value: datetime | None) -> str:
    """How long ago, coarse (s, min, h, d); '-' for None."""
    if value is None:
        return "-"
    return seconds(max(0.0, (datetime.now(UTC) - value).total_seconds()))


def seconds(value: float | None) -> str:
    """A duration in seconds as s/min/h/d."""
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    if value < 172800:
        return f"{value / 3600:.0f} h"
    return f"{value / 86400:.0f} d"


def pretty(value: Any) -> str:
    """JSON for people: indented, non-ASCII kept; the template escapes it."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(amount=amount, when=when, ago=ago, seconds=seconds, pretty=pretty)
    env.globals["query"] = lambda **kw: urlencode({k: v for k, v in kw.items() if v})
    return env


TEMPLATES = Jinja2Templates(env=_environment())


def secure(response: Response) -> Response:
    """Add the console's security headers to a response."""
    response.headers.update(SECURITY_HEADERS)
    return response


def page(
    request: Request,
    template: str,
    session: Session | None,
    code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """Render `template` with the session (for the menu and CSRF fields) and headers."""
    response = TEMPLATES.TemplateResponse(
        request,
        template,
        {"session": session, "now": datetime.now(UTC), **context},
        status_code=code,
    )
    secure(response)
    return response


def redirect(url: str) -> RedirectResponse:
    """303 See Other to `url` (after a POST, the browser GETs the result)."""
    response = RedirectResponse(url, status_code=303)
    secure(response)
    return response


def state(request: Request) -> ApiState:
    """The API's runtime state (pool, Redis, settings)."""
    return api_state(request)


async def current_session(request: Request) -> Session:
    """FastAPI dependency: the live session, or `SignInNeeded`."""
    st = state(request)
    session = await session_of(st.pool, st.settings, request.cookies.get(COOKIE))
    if session is None:
        raise SignInNeeded
    if any(NUL in str(value) for value in request.path_params.values()):
        # No stored id holds NUL (PostgreSQL text cannot): the page of an unknown id,
        # before a query the driver would refuse.
        raise ConsoleError(404, "There is no such page.")
    return session


def scope(session: Session) -> Any:
    """The tenancy scope of queries: None (every merchant) for an admin, else own id."""
    return None if session.merchant.is_admin else session.merchant.id


def require_admin(session: Session) -> None:
    """Operator pages: a merchant's session gets the same 404 as an unknown page."""
    if not session.merchant.is_admin:
        raise ConsoleError(404, "There is no such page.")


async def check_csrf(request: Request, session: Session, *, writes: bool = True) -> dict[str, str]:
    """The POSTed form, after checking its CSRF token against the session's; 403 when
    missing or wrong (constant-time comparison), and 403 for a session signed in with a
    `read` key unless the form changes nothing of the merchant's (`writes=False`: sign-out).
    Every console form goes through here, so a read key's session changes nothing."""
    if writes and session.merchant.scope is not KeyScope.WRITE:
        raise ConsoleError(403, "You signed in with a read-only API key: this needs a write key.")
    form = await request.form()
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    if not tokens_match(session.csrf_token, fields.get("csrf_token")):
        raise ConsoleError(403, "This form is missing its security token. Reload the page.")
    if any(NUL in value for value in fields.values()):
        raise ConsoleError(422, "A field holds a NUL character, which cannot be stored.")
    return fields
