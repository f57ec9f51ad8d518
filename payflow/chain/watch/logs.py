"""`eth_getLogs` answers checked, not assumed: limits adapted to, "nothing there" verified.

A node's `eth_getLogs` answer is read by the scanner and by `recon --chain`; an empty
answer must mean "no such log", never "this replica has not seen those blocks" or "the
provider truncated". Three checks, all here:

- **Limits adapted to.** Providers refuse a range or a result count over their limit
  with a JSON-RPC error ("block range too large", "query returned more than 10000
  results", code -32005 …). `logs_in_range` then splits the range in halves, down to one
  block, and remembers the span that worked (`SpanMemory`) so the next ranges start
  there; only a single block over the limit is raised (`LogsTooDense`). A provider
  THROTTLING us (request rate, credits: Infura's -32005 "project ID request rate
  exceeded", QuickNode's "credits limited to 6000/sec") is not a size limit: splitting
  would send more requests, so it is waited out (`ProviderThrottled`, retryable).
- **Only what was asked is taken.** A log of another contract, recipient topic or block
  range than the query named (a misbehaving node or proxy) is dropped; the query that
  asks for it gets it.
- **The answering node holds the range.** The logs query goes in one JSON-RPC batch
  with `eth_getBlockByNumber(end)`: a replica behind a load balancer that has not seen
  `end` answers null (or another hash) there, and the range is read again later
  (`RangeMoved`), never passed as empty.
- **Empty is verified against the header.** A block whose `logsBloom` says it may hold
  a `Transfer` of a registered contract to one of our addresses, but for which the range
  query returned nothing, is asked again by its hash (`eth_getLogs{blockHash}`, EIP-234:
  a node that does not know the block answers an error, which is retried). Logs found
  that way are used (counted in `payflow_scanner_logs_rechecked_total{outcome="found"}`);
  an empty answer is a bloom false positive.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eth_hash.auto import keccak
from prometheus_client import Counter

from payflow.chain.rpc import RpcClient, RpcError, to_hex
from payflow.errors import PayflowError, RetryableError
from payflow.metrics import REGISTRY

Call = Callable[[Callable[[RpcClient], Awaitable[Any]]], Awaitable[Any]]
LIMIT_CODES = frozenset({-32005})
LIMIT_WORDS = (
    "range",
    "limit",
    "too many",
    "too large",
    "too big",
    "exceed",
    "more than",
    "max results",
    "response size",
)

# A provider throttling the caller (not refusing the query's size): splitting would only
# send more requests. Wordings seen: Infura -32005 "project ID request rate exceeded",
# QuickNode -32012 "credits limited to 6000/sec", Alchemy 429 "Your app has exceeded its
# compute units per second capacity", and the generic "Too many requests".
RATE_CODES = frozenset({429, -32012, -32029})
RATE_WORDS = (
    "rate limit",
    "request rate",
    "rate exceeded",
    "ratelimit",
    "per second",
    "/sec",
    "capacity",
    "credits",
    "too many requests",
    "throttl",
    "backoff",
    "daily request",
)

RECHECKED = Counter(
    "payflow_scanner_logs_rechecked_total",
    "Blocks whose bloom matched our transfers but whose range query returned no log,"
    " asked again by hash (outcome: found = the range answer had missed them, none)",
    ("chain", "outcome"),
    registry=REGISTRY,
)
SPLITS = Counter(
    "payflow_rpc_logs_splits_total",
    "eth_getLogs ranges split because the provider refused their size or result count",
    ("chain",),
    registry=REGISTRY,
)


class RangeNotHeld(RetryableError):
    """The node that answered the logs query does not hold the range (yet)."""


class ProviderThrottled(RetryableError):
    """The provider rate-limits us (requests per second, credits): wait, never split."""


class LogsTooDense(PayflowError):
    """One block's logs are over the provider's limit: cannot split further."""


@dataclass(slots=True)
class SpanMemory:
    """The widest `eth_getLogs` span (blocks) the provider accepted after refusing a
    wider one; None until it refused anything. One per chain and reader."""

    blocks: int | None = None


def is_rate_limited(error: RpcError) -> bool:
    """Does this JSON-RPC error throttle the caller (a request rate or credit budget)
    rather than refuse the query's size? Such an error is waited out, not split."""
    text = error.message.lower() + " "
    return error.code in RATE_CODES or any(word in text for word in RATE_WORDS)


def is_limit_error(error: RpcError) -> bool:
    """Does this JSON-RPC error refuse the query's size (range or result count)? A rate
    limit is not one (`is_rate_limited`), whatever its code (Infura throttles with -32005
    too)."""
    if is_rate_limited(error):
        return False
    text = error.message.lower()
    return error.code in LIMIT_CODES or any(word in text for word in LIMIT_WORDS)


def answers_query(
    log: dict[str, Any], first: int, last: int, tokens: Sequence[str], topics: list[Any]
) -> bool:
    """Is `log` an answer to `eth_getLogs` over `first..last` for `tokens` and `topics`
    (each topic position: None = any, a string, or a list of alternatives)? A node may
    send logs of another contract, recipient or block range: they are not what was asked
    and are dropped (the query that asks for them gets them)."""
    number = log.get("blockNumber")
    try:
        height = int(str(number), 16)
    except ValueError:
        return False
    if not first <= height <= last:
        return False
    return _matches(log, tokens, topics)


def _matches(log: dict[str, Any], tokens: Sequence[str], topics: list[Any]) -> bool:
    if str(log.get("address", "")).lower() not in {t.lower() for t in tokens}:
        return False
    have = [str(t).lower() for t in log.get("topics") or []]
    for i, wanted in enumerate(topics):
        if wanted is None:
            continue
        options = {str(w).lower() for w in (wanted if isinstance(wanted, list) else [wanted])}
        if i >= len(have) or have[i] not in options:
            return False
    return True


def _bloom_bits(item: bytes) -> list[int]:
    digest = keccak(item)
    return [((digest[i] << 8) | digest[i + 1]) & 2047 for i in (0, 2, 4)]


def bloom_contains(bloom: bytes, item: bytes) -> bool:
    """May a 2048-bit Ethereum bloom (256 bytes) contain `item` (an address or a topic)?"""
    if len(bloom) != 256:
        return True  # no usable bloom: assume it may
    return all(bloom[255 - bit // 8] & (1 << (bit % 8)) for bit in _bloom_bits(item))


def _bytes(hex_text: str) -> bytes:
    return bytes.fromhex(hex_text[2:] if hex_text.startswith("0x") else hex_text)


def may_hold_transfer(
    bloom_hex: str | None, tokens: Sequence[str], topic: str, address_topics: Sequence[str]
) -> bool:
    """Does the block's `logsBloom` allow a `topic` log of one of `tokens` whose
    recipient topic is one of `address_topics`? (False is certain; True may be a bloom
    false positive.)"""
    if not bloom_hex:
        return True
    try:
        bloom = _bytes(bloom_hex)
    except ValueError:
        return True
    return (
        bloom_contains(bloom, _bytes(topic))
        and any(bloom_contains(bloom, _bytes(t)) for t in tokens)
        and any(bloom_contains(bloom, _bytes(a)) for a in address_topics)
    )


async def logs_in_range(
    call: Call,
    chain: str,
    start: int,
    end: int,
    end_hash: str,
    *,
    tokens: Sequence[str],
    topics: list[Any],
    memory: SpanMemory | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The logs of `start..end` (inclusive) matching `tokens`/`topics`, and the number of
    requests made. `end_hash` is the hash of block `end` as already read: the answering
    node must hold it. Splits on limit errors (see the module docstring). Raises
    `RangeNotHeld` (retryable), `LogsTooDense`, `RpcError` for any other error."""
    memory = memory if memory is not None else SpanMemory()
    found: list[dict[str, Any]] = []
    calls = 0
    pending = [(start, end)]
    if memory.blocks is not None:
        step = max(memory.blocks, 1)
        pending = [(s, min(s + step - 1, end)) for s in range(start, end + 1, step)]
    pending.reverse()
    while pending:
        first, last = pending.pop()
        calls += 1
        try:
            found.extend(await call(_held_query(first, last, end, end_hash, tokens, topics)))
        except RpcError as error:
            if is_rate_limited(error):
                raise ProviderThrottled(
                    f"{chain}: the provider throttles eth_getLogs ({error.message[:120]})"
                ) from None
            if not is_limit_error(error):
                raise
            if first == last:
                raise LogsTooDense(
                    f"{chain}: eth_getLogs of block {first} alone is over the provider's"
                    f" limit ({error.message[:120]})"
                ) from None
            middle = (first + last) // 2
            memory.blocks = middle - first + 1
            SPLITS.labels(chain).inc()
            pending.append((middle + 1, last))
            pending.append((first, middle))
    return found, calls


def _held_query(
    first: int, last: int, end: int, end_hash: str, tokens: Sequence[str], topics: list[Any]
) -> Callable[[RpcClient], Awaitable[list[dict[str, Any]]]]:
    query = {
        "fromBlock": to_hex(first),
        "toBlock": to_hex(last),
        "address": list(tokens),
        "topics": topics,
    }

    async def ask(rpc: RpcClient) -> list[dict[str, Any]]:
        logs, block = await rpc.batch(
            [("eth_getLogs", [query]), ("eth_getBlockByNumber", [to_hex(end), False])]
        )
        if block is None or str(block.get("hash", "")).lower() != end_hash:
            raise RangeNotHeld(f"the node answering eth_getLogs does not hold block {end}")
        return [log for log in logs or [] if answers_query(log, first, last, tokens, topics)]

    return ask


async def logs_by_hash(
    call: Call, hashes: Sequence[str], *, tokens: Sequence[str], topics: list[Any]
) -> list[list[dict[str, Any]]]:
    """The logs of each block in `hashes` (one batch of `eth_getLogs{blockHash}`), only
    those of that block, contract and topics (what was asked). A node that does not know
    a block answers an error: `RangeNotHeld` (retry later)."""
    if not hashes:
        return []
    calls: list[tuple[str, list[Any]]] = [
        ("eth_getLogs", [{"blockHash": h, "address": list(tokens), "topics": topics}])
        for h in hashes
    ]

    async def ask(rpc: RpcClient) -> list[Any]:
        try:
            return await rpc.batch(calls)
        except RpcError as error:
            raise RangeNotHeld(f"eth_getLogs by block hash: {error.message[:120]}") from None

    answers: list[Any] = await call(ask)
    return [
        [
            log
            for log in answer or []
            if str(log.get("blockHash", "")).lower() == block_hash.lower()
            and _matches(log, tokens, topics)
        ]
        for block_hash, answer in zip(hashes, answers, strict=True)
    ]
