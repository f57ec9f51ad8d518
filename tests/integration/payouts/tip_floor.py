"""A JSON-RPC front for anvil that enforces a minimum priority fee, as several EVM chains'
nodes do (geth's `--txpool.pricelimit`, Polygon's 25-30 gwei floor): a raw transaction
whose tip is below the floor is refused with geth's words, everything else is forwarded
to the real anvil unchanged. anvil itself has no such floor, so this stands in for the
node's txpool policy only; the chain behind it is real."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvicorn
from eth_account.typed_transactions import TypedTransaction
from hexbytes import HexBytes
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from payflow_lab.ports import free_port


def _tip(raw: str) -> int:
    tx = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
    return int(tx["maxPriorityFeePerGas"])


def _app(client: httpx.AsyncClient, upstream: str, floor_wei: int, refused: list[str]) -> Starlette:
    async def one(call: dict[str, Any]) -> dict[str, Any]:
        if call.get("method") == "eth_sendRawTransaction":
            tip = _tip(call["params"][0])
            if tip < floor_wei:
                refused.append(call["params"][0])
                return {
                    "jsonrpc": "2.0",
                    "id": call.get("id"),
                    "error": {
                        "code": -32000,
                        "message": f"transaction underpriced: tip needed {floor_wei},"
                        f" tip permitted {tip}",
                    },
                }
        answer = await client.post(upstream, json=call)
        body: dict[str, Any] = answer.json()
        return body

    async def rpc(request: Request) -> JSONResponse:
        body = await request.json()
        if isinstance(body, list):
            return JSONResponse([await one(call) for call in body])
        return JSONResponse(await one(body))

    return Starlette(routes=[Route("/", rpc, methods=["POST"])])


@contextlib.asynccontextmanager
async def tip_floor_node(upstream: str, floor_wei: int) -> AsyncIterator[tuple[str, list[str]]]:
    """(url, refused raw txs) of a front on 127.0.0.1 refusing tips below `floor_wei`."""
    refused: list[str] = []
    port = free_port()
    client = httpx.AsyncClient(timeout=10.0)
    config = uvicorn.Config(
        _app(client, upstream, floor_wei, refused),
        host="127.0.0.1",
        port=port,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(500):  # at most 10 s
        if server.started:
            break
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", refused
    finally:
        server.should_exit = True
        await task
        await client.aclose()
