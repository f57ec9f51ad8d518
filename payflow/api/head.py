"""HEAD on every GET route (RFC 9110 section 9.3.2: a general-purpose server supports GET
and HEAD). FastAPI registers only the methods a route names, so HEAD answered 405.

`HeadAsGet` serves a HEAD request as the GET it mirrors (same authentication, limits,
status and headers, `Content-Length` included) and sends no body. A path without a GET
answers HEAD as it answers GET (405, `Allow` naming its methods).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """ASGI middleware: HEAD becomes GET inside the app; the response body is dropped."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return  # the rest of a streamed body: nothing of it is sent
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_without_body)
