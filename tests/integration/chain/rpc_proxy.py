"""A JSON-RPC proxy in front of a real anvil that rewrites chosen answers, to emulate
misbehaving nodes and providers (a lagging replica, a provider's eth_getLogs limits, a
node without the `finalized` tag). The node behind it stays real: every request is
forwarded, and `rewrite(method, params, answer)` may replace the answer object."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import orjson
from aiohttp import web

Rewrite = Callable[[str, list[Any], dict[str, Any]], dict[str, Any]]


def error(answer: dict[str, Any], code: int, message: str) -> dict[str, Any]:
    """The JSON-RPC error answer to the request `answer` answered."""
    return {"jsonrpc": "2.0", "id": answer.get("id"), "error": {"code": code, "message": message}}


def keep(_method: str, _params: list[Any], answer: dict[str, Any]) -> dict[str, Any]:
    return answer


class RpcProxy:
    """`url` forwards to `upstream`; `rewrite` (settable at any time) edits answers;
    `calls` records every (method, params) seen."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.rewrite: Rewrite = keep
        self.calls: list[tuple[str, list[Any]]] = []
        self._client = httpx.AsyncClient(timeout=10.0)
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> RpcProxy:
        app = web.Application()
        app.router.add_post("/", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def aclose(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        await self._client.aclose()

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        sent = orjson.loads(body)
        response = await self._client.post(
            self.upstream, content=body, headers={"content-type": "application/json"}
        )
        answer = orjson.loads(response.content)
        if isinstance(sent, list):
            by_id = {item.get("id"): item for item in answer}
            out = [self._one(item, by_id[item.get("id")]) for item in sent]
            return web.Response(body=orjson.dumps(out), content_type="application/json")
        return web.Response(
            body=orjson.dumps(self._one(sent, answer)), content_type="application/json"
        )

    def _one(self, sent: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
        method, params = str(sent.get("method")), list(sent.get("params") or [])
        self.calls.append((method, params))
        return self.rewrite(method, params, answer)
