"""The console: server-rendered pages under /console, served by the API role.

`install_console(app)` adds the routes, the stylesheet and the two exception handlers
that turn `ConsoleError` and `SignInNeeded` into pages. Nothing is built at import time
beyond the template environment; the pool and Redis come from the API's lifespan.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import Response

from .web import HERE, ConsoleError, SignInNeeded, page, redirect, secure

__all__ = ["install_console"]

STYLESHEET = "console.css"


def install_console(app: FastAPI) -> None:
    """Mount /console on `app` (pages, forms, /console/static/console.css, error pages)."""
    from . import (
        actions,
        books_pages,
        chain_pages,
        endpoint_pages,
        key_pages,
        money_pages,
        ops_pages,
        pages,
    )

    css = (HERE / "static" / STYLESHEET).read_bytes()

    async def stylesheet() -> Response:
        response = Response(css, media_type="text/css; charset=utf-8")
        secure(response)
        response.headers["Cache-Control"] = "public, max-age=3600"
        return response

    app.add_api_route(
        f"/console/static/{STYLESHEET}", stylesheet, methods=["GET"], include_in_schema=False
    )
    app.include_router(actions.router)
    app.include_router(chain_pages.router)  # these before pages' catch-all /console/{rest:path}
    app.include_router(money_pages.router)
    app.include_router(books_pages.router)
    app.include_router(key_pages.router)
    app.include_router(ops_pages.router)
    app.include_router(endpoint_pages.router)
    app.include_router(pages.router)

    async def on_console_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ConsoleError)
        from .sessions import COOKIE, session_of
        from .web import state

        st = state(request)
        session = await session_of(st.pool, st.settings, request.cookies.get(COOKIE))
        return page(request, "error.html", session, code=exc.status, message=exc.message)

    async def on_signin_needed(request: Request, exc: Exception) -> Response:
        return redirect("/console/signin")

    app.add_exception_handler(ConsoleError, on_console_error)
    app.add_exception_handler(SignInNeeded, on_signin_needed)
