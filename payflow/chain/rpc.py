"""A small async Ethereum JSON-RPC client over httpx.

One `RpcClient` per chain (name + URL). It only speaks the wire: it does not cache and
it does not decide whether the node is healthy; the finality cache and the circuit
breaker wrap it (`payflow.chain` lifecycle modules). Every call is counted in
`payflow_rpc_requests_total{method,outcome}`.

Errors:
- `RpcUnavailable` (a `RetryableError`): timeout, refused or reset connection, an HTTP
  status other than 200, a body that is not JSON-RPC. The node may recover; callers wait.
- `RpcError`: the node answered with a JSON-RPC error object (`code`, `message`). Whether
  it is retryable is the caller's decision (e.g. "already known" on a broadcast is success).

Quantities on the wire are hex strings; `hex_int`/`to_hex` convert them exactly.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import httpx
import orjson
from prometheus_client import Counter

from payflow.errors import PayflowError, RetryableError
from payflow.metrics import REGISTRY

RPC_REQUESTS = Counter(
    "payflow_rpc_requests_total",
    "Ethereum JSON-RPC requests by method and outcome (ok, error, unavailable)",
    ("method", "outcome"),
    registry=REGISTRY,
)


_QUANTITY = re.compile(r"0x[0-9a-fA-F]+")


class RpcUnavailable(RetryableError):
    """The node could not be asked (transport, timeout, HTTP status, garbage body)."""


class RpcError(PayflowError):
    """The node answered with a JSON-RPC error object."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method}: JSON-RPC error {code}: {message}")
        self.method = method
        self.code = code
        self.message = message


def hex_int(value: str | None) -> int | None:
    """A JSON-RPC quantity ("0x1a") as an int; None stays None. ValueError on garbage."""
    if value is None:
        return None
    if not isinstance(value, str) or not _QUANTITY.fullmatch(value):
        raise ValueError(f"not a hex quantity: {value[:40] if isinstance(value, str) else value!r}")
    return int(value, 16)


def to_hex(value: int) -> str:
    """An int as a JSON-RPC quantity."""
    if value < 0:
        raise ValueError("quantities are non-negative")
    return hex(value)


class RpcClient:
    """JSON-RPC over HTTP to one node. `timeout_s` bounds every request end to end."""

    def __init__(
        self,
        url: str,
        *,
        chain: str = "ETH_MAINNET",
        timeout_s: float = 5.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url
        self.chain = chain
        self._ids = itertools.count(1)
        self._own_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
        )

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()

    async def __aenter__(self) -> RpcClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def call(self, method: str, *params: Any) -> Any:
        """The `result` of one JSON-RPC call. Raises `RpcUnavailable` or `RpcError`."""
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": list(params)}
        answer = await self._post(method, body)
        if not isinstance(answer, dict):
            RPC_REQUESTS.labels(method, "unavailable").inc()
            raise RpcUnavailable(f"{method}: the node sent a body that is not a JSON-RPC object")
        return self._result(method, answer)

    async def batch(self, calls: list[tuple[str, list[Any]]]) -> list[Any]:
        """Several calls in one HTTP request; results in the order of `calls`.

        Raises the first call's `RpcError` if any call failed (callers needing partial
        results make single calls)."""
        if not calls:
            return []
        first = next(self._ids)
        ids = [first + i for i in range(len(calls))]
        for _ in range(len(calls) - 1):
            next(self._ids)
        body = [
            {"jsonrpc": "2.0", "id": i, "method": m, "params": p}
            for i, (m, p) in zip(ids, calls, strict=True)
        ]
        answer = await self._post("batch", body)
        if not isinstance(answer, list) or len(answer) != len(calls):
            RPC_REQUESTS.labels("batch", "unavailable").inc()
            raise RpcUnavailable("batch: the node did not answer every call")
        by_id = {item.get("id"): item for item in answer if isinstance(item, dict)}
        results = []
        for i, (method, _params) in zip(ids, calls, strict=True):
            item = by_id.get(i)
            if item is None:
                RPC_REQUESTS.labels(method, "unavailable").inc()
                raise RpcUnavailable(f"{method}: missing from the batch answer")
            results.append(self._result(method, item))
        return results

    async def _post(self, method: str, body: Any) -> Any:
        try:
            response = await self._client.post(
                self.url,
                content=orjson.dumps(body),
                headers={"content-type": "application/json"},
            )
        except (httpx.TimeoutException, httpx.TransportError) as error:
            RPC_REQUESTS.labels(method, "unavailable").inc()
            raise RpcUnavailable(f"{method}: {type(error).__name__}") from None
        if response.status_code != 200:
            RPC_REQUESTS.labels(method, "unavailable").inc()
            raise RpcUnavailable(f"{method}: HTTP {response.status_code}")
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError:
            RPC_REQUESTS.labels(method, "unavailable").inc()
            raise RpcUnavailable(f"{method}: the node's answer is not JSON") from None

    @staticmethod
    def _result(method: str, answer: dict[str, Any]) -> Any:
        error = answer.get("error")
        if error is not None:
            RPC_REQUESTS.labels(method, "error").inc()
            code = error.get("code", 0) if isinstance(error, dict) else 0
            message = error.get("message", "") if isinstance(error, dict) else str(error)
            raise RpcError(method, int(code) if isinstance(code, int) else 0, str(message))
        RPC_REQUESTS.labels(method, "ok").inc()
        return answer.get("result")

    # --- the reads every chain module needs -------------------------------------------

    async def block_number(self) -> int:
        """The head block number."""
        value = hex_int(await self.call("eth_blockNumber"))
        assert value is not None
        return value

    async def get_block(self, tag: int | str, *, full: bool = False) -> dict[str, Any] | None:
        """The block at a number or tag ("latest", "finalized", "safe"); None if absent."""
        ref = to_hex(tag) if isinstance(tag, int) else tag
        block: dict[str, Any] | None = await self.call("eth_getBlockByNumber", ref, full)
        return block

    async def get_receipt(self, tx_hash: str) -> dict[str, Any] | None:
        """The receipt of a mined transaction; None when the node knows no such receipt."""
        receipt: dict[str, Any] | None = await self.call("eth_getTransactionReceipt", tx_hash)
        return receipt

    async def get_transaction(self, tx_hash: str) -> dict[str, Any] | None:
        """The transaction (mined or pending); None when the node does not know it."""
        tx: dict[str, Any] | None = await self.call("eth_getTransactionByHash", tx_hash)
        return tx

    async def get_logs(
        self,
        from_block: int,
        to_block: int,
        *,
        address: list[str] | None = None,
        topics: list[Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Logs of a block range (inclusive), filtered by contract and topics."""
        query: dict[str, Any] = {"fromBlock": to_hex(from_block), "toBlock": to_hex(to_block)}
        if address is not None:
            query["address"] = address
        if topics is not None:
            query["topics"] = topics
        logs: list[dict[str, Any]] = await self.call("eth_getLogs", query)
        return logs

    async def get_balance(self, address: str, tag: int | str = "latest") -> int:
        """The native balance of `address` in wei."""
        ref = to_hex(tag) if isinstance(tag, int) else tag
        value = hex_int(await self.call("eth_getBalance", address, ref))
        assert value is not None
        return value

    async def send_raw_transaction(self, raw: str) -> str:
        """Broadcast a signed transaction; its hash."""
        tx_hash: str = await self.call("eth_sendRawTransaction", raw)
        return tx_hash
