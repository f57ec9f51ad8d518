"""The finality oracle: what the node says is final, through a Redis cache and a breaker.

One `FinalityOracle` serves every configured chain (`chain_configs`). Each read goes
through the chain's circuit breaker (`payflow.chain.breaker`) and raises the retryable
`ChainUnavailable` while the node cannot be asked; deposits then wait.

Cache (Redis, `{prefix}chain:{chain}:…`; an outage only costs speed):
- answers about FINAL blocks never change: a final block's hash, a receipt or a
  transaction whose block is final (and whose hash is the final one at that height)
  are kept `CHAIN_CACHE_FINAL_TTL_S` (on a `confirmations:N` chain only below the
  reorg watch, since a deeper reorg can still undo them);
- everything else (head, the finalized height, non-final blocks and receipts, a
  missing receipt) only `CHAIN_CACHE_RECENT_TTL_S`.
So re-verifying a deposit in a final block with a warm cache costs no RPC call.

Receipts and transactions are trimmed to the fields verification needs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
from redis.asyncio import Redis

from payflow.chain.breaker import REDIS_ERRORS, Breaker
from payflow.chain.config import ChainConfig, PolicyKind, chain_configs
from payflow.chain.rpc import RpcClient, hex_int
from payflow.config import ChainSettings, RedisSettings
from payflow.errors import ChainUnavailable

T = TypeVar("T")
_MISSING = object()


def _trim_receipt(receipt: dict[str, Any] | None) -> dict[str, Any] | None:
    if receipt is None:
        return None
    return {
        "transactionHash": str(receipt.get("transactionHash", "")).lower(),
        "status": receipt.get("status"),
        "blockNumber": hex_int(receipt.get("blockNumber")),
        "blockHash": str(receipt.get("blockHash") or "").lower() or None,
        "to": (receipt.get("to") or "").lower() or None,
        "logs": [
            {
                "address": str(log.get("address", "")).lower(),
                "topics": [str(topic).lower() for topic in log.get("topics", [])],
                "data": str(log.get("data", "0x")),
                "logIndex": hex_int(log.get("logIndex")),
            }
            for log in receipt.get("logs", [])
        ],
    }


def _trim_transaction(tx: dict[str, Any] | None) -> dict[str, Any] | None:
    if tx is None:
        return None
    return {
        "hash": str(tx.get("hash", "")).lower(),
        "to": (tx.get("to") or "").lower() or None,
        "value": str(hex_int(tx.get("value")) or 0),
        "blockNumber": hex_int(tx.get("blockNumber")),
        "blockHash": str(tx.get("blockHash") or "").lower() or None,
    }


class FinalityOracle:
    """Policy-aware finality, block hashes, receipts and transactions per chain.

    `redis` may be None (no cache, in-process breaker only); its keys start with
    `redis_settings.redis_key_prefix`. Close with `aclose()`.
    """

    def __init__(
        self,
        settings: ChainSettings,
        redis: Redis | None,
        configs: dict[str, ChainConfig] | None = None,
        *,
        redis_settings: RedisSettings,
    ) -> None:
        self.settings = settings
        self.key_prefix = redis_settings.redis_key_prefix
        self.redis = redis
        self.configs = chain_configs(settings) if configs is None else configs
        self.clients = {
            name: RpcClient(config.rpc_url, chain=name, timeout_s=settings.rpc_timeout_s)
            for name, config in self.configs.items()
        }
        self.breakers = {
            name: Breaker(
                name,
                redis,
                prefix=self.key_prefix,
                threshold=settings.chain_breaker_failures,
                open_s=settings.chain_breaker_open_s,
                probe_ttl_s=max(settings.rpc_timeout_s * 2, 1.0),
            )
            for name in self.configs
        }
        self.rpc_calls = 0  # RPC calls made through `call` (for the bench and tests)
        # chain -> monotonic deadline of its last passed node check (`chain.identity`)
        self.node_checked: dict[str, float] = {}

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()

    def config(self, chain: str) -> ChainConfig:
        """The chain's configuration; `ChainUnavailable` when it has no RPC configured."""
        config = self.configs.get(chain)
        if config is None:
            raise ChainUnavailable(f"chain {chain} has no RPC configured")
        return config

    async def call(self, chain: str, fn: Callable[[RpcClient], Awaitable[T]]) -> T:
        """`fn(client)` under the chain's breaker; raises `ChainUnavailable`."""
        self.config(chain)
        client = self.clients[chain]
        self.rpc_calls += 1
        return await self.breakers[chain].call(lambda: fn(client))

    # --- cache ------------------------------------------------------------------------

    def _key(self, chain: str, kind: str, ident: str | int) -> str:
        return f"{self.key_prefix}chain:{chain}:{kind}:{ident}"

    async def _cached(self, key: str) -> Any:
        if self.redis is None:
            return _MISSING
        try:
            raw = await self.redis.get(key)
        except REDIS_ERRORS:
            return _MISSING
        return _MISSING if raw is None else orjson.loads(raw)

    async def _store(self, key: str, value: Any, *, final: bool) -> None:
        if self.redis is None:
            return
        ttl_ms = (
            self.settings.chain_cache_final_ttl_s * 1000
            if final
            else int(self.settings.chain_cache_recent_ttl_s * 1000)
        )
        try:
            await self.redis.set(key, orjson.dumps(value), px=max(ttl_ms, 1))
        except REDIS_ERRORS:
            return

    # --- reads ------------------------------------------------------------------------

    async def head(self, chain: str) -> int:
        """The head block number (cached briefly)."""
        key = self._key(chain, "head", "latest")
        cached = await self._cached(key)
        if cached is not _MISSING:
            return int(cached)
        number = await self.call(chain, lambda rpc: rpc.block_number())
        await self._store(key, number, final=False)
        return number

    async def finalized_height(self, chain: str) -> int:
        """The highest final block number under the chain's policy (cached briefly):
        the `finalized` tag's block, or head - N; -1 when nothing is final yet."""
        config = self.config(chain)
        if config.policy.kind is PolicyKind.CONFIRMATIONS:
            return await self.head(chain) - config.policy.confirmations
        key = self._key(chain, "finalized", "tag")
        cached = await self._cached(key)
        if cached is not _MISSING:
            return int(cached)
        block = await self.call(chain, lambda rpc: rpc.get_block("finalized"))
        number = -1 if block is None else hex_int(block.get("number"))
        number = -1 if number is None else number
        await self._store(key, number, final=False)
        return number

    async def block_hash(self, chain: str, number: int) -> str | None:
        """The hash of the canonical block at `number`, None when there is none yet.
        Cached long once `number` is final."""
        key = self._key(chain, "hash", number)
        cached = await self._cached(key)
        if cached is not _MISSING:
            return None if cached is None else str(cached)
        block = await self.call(chain, lambda rpc: rpc.get_block(number))
        found = None if block is None else str(block.get("hash", "")).lower() or None
        final = found is not None and await self._settled(chain, number)
        await self._store(key, found, final=final)
        return found

    async def _settled(self, chain: str, number: int) -> bool:
        """May answers about block `number` be cached long? Under `finalized`, once it is
        final. Under `confirmations:N` "final" can still be undone by a deeper reorg, so
        only below the reorg watch (`CHAIN_REORG_WATCH_BLOCKS` under head - N)."""
        config = self.config(chain)
        if config.policy.kind is PolicyKind.FINALIZED:
            return number <= await self.finalized_height(chain)
        depth = self.settings.chain_reorg_watch_blocks
        return number <= await self.finalized_height(chain) - depth

    async def block_time(self, chain: str, block_hash: str) -> int | None:
        """The timestamp (Unix seconds) of the block `block_hash`; None when the node
        does not know that block. A hash's timestamp never changes: cached long."""
        key = self._key(chain, "time", block_hash.lower())
        cached = await self._cached(key)
        if cached is not _MISSING:
            return None if cached is None else int(cached)

        async def ask(rpc: RpcClient) -> Any:
            return await rpc.call("eth_getBlockByHash", block_hash, False)

        block = await self.call(chain, ask)
        found = None if block is None else hex_int(block.get("timestamp"))
        await self._store(key, found, final=found is not None)
        return found

    async def is_final(self, chain: str, number: int, block_hash: str) -> bool | None:
        """True when block `number` is final and its hash is `block_hash`; False when the
        canonical block at `number` has another hash now; None when it is not final yet
        but still canonical, or when the node has no block at `number` (a replica behind
        the one that gave the receipt, or a chain shorter for now): no proof either way."""
        current = await self.block_hash(chain, number)
        if current is None:
            return None
        if current != block_hash:
            return False
        return True if number <= await self.finalized_height(chain) else None

    async def _final_anchor(self, chain: str, item: dict[str, Any] | None) -> bool:
        if item is None or item.get("blockNumber") is None or not item.get("blockHash"):
            return False
        number = int(item["blockNumber"])
        if not await self._settled(chain, number):
            return False
        return await self.block_hash(chain, number) == str(item["blockHash"])

    async def receipt(self, chain: str, tx_hash: str) -> dict[str, Any] | None:
        """The trimmed receipt (`status`, `blockNumber` int, `blockHash`, `to`, `logs`);
        None when the node knows no receipt. Cached long once its block is final."""
        key = self._key(chain, "receipt", tx_hash.lower())
        cached = await self._cached(key)
        if cached is not _MISSING:
            return cached  # type: ignore[no-any-return]  # our own trimmed JSON
        receipt = _trim_receipt(await self.call(chain, lambda rpc: rpc.get_receipt(tx_hash)))
        await self._store(key, receipt, final=await self._final_anchor(chain, receipt))
        return receipt

    async def transaction(self, chain: str, tx_hash: str) -> dict[str, Any] | None:
        """The trimmed transaction (`to`, `value` decimal text in wei, `blockNumber`,
        `blockHash`); None when unknown. Cached long once its block is final."""
        key = self._key(chain, "tx", tx_hash.lower())
        cached = await self._cached(key)
        if cached is not _MISSING:
            return cached  # type: ignore[no-any-return]  # our own trimmed JSON
        tx = _trim_transaction(await self.call(chain, lambda rpc: rpc.get_transaction(tx_hash)))
        await self._store(key, tx, final=await self._final_anchor(chain, tx))
        return tx

    async def breaker_states(self) -> dict[str, int]:
        """Each chain's breaker state (0 closed, 1 open, 2 half-open)."""
        return {name: int(await breaker.state()) for name, breaker in self.breakers.items()}
