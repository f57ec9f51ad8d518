"""Reading a block range from the node: headers, native transfers and ERC-20 `Transfer`
logs to our deposit addresses, each with its position inside its transaction.

No database here. `read_range` asks the node, through `call` (the chain's breaker in
the service, a bare client in the benchmark), for:
1. the blocks `start..end` with full transactions, in JSON-RPC batches of `BODY_BATCH`;
   consecutive blocks must chain by parent hash (else the node reorged while we read);
2. `eth_getLogs` over the whole range for the REGISTERED token contracts, topic0
   `Transfer`, topic2 one of our addresses (addresses in batches of `address_batch`),
   checked by `payflow.chain.watch.logs`: batched with the header of `end` (the answering
   node must hold the range), split on a provider's range or result limit, and every
   block whose `logsBloom` may hold one of our transfers but got no log is asked again
   by its hash (an empty answer is verified, not assumed);
3. the receipts of just the transactions that matched (one batch): a native transfer
   counts only when its receipt succeeded, and a log's position is its index among the
   receipt's logs (found by its block-level `logIndex`), which survives re-inclusion.
Cost: ceil(blocks / BODY_BATCH) + ceil(addresses / address_batch) (+ splits) + (1 if a
bloom matched without a log) + (1 if anything matched) calls per range.

Every log and receipt must name the block hash read in step 1; otherwise the chain
moved under us and `RangeMoved` (retryable) makes the caller read again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from payflow.chain.rpc import RpcClient, hex_int, to_hex
from payflow.chain.transfers import NATIVE_POSITION, TRANSFER_TOPIC, Transfer, topic_address
from payflow.chain.watch.logs import (
    RECHECKED,
    SpanMemory,
    logs_by_hash,
    logs_in_range,
    may_hold_transfer,
)
from payflow.errors import RetryableError

T = TypeVar("T")
Call = Callable[[Callable[[RpcClient], Awaitable[T]]], Awaitable[T]]
RECEIPT_BATCH = 200
BODY_BATCH = 50  # full blocks per JSON-RPC batch


class RangeMoved(RetryableError):
    """The node's chain changed while a range was read (a reorg at the head)."""


@dataclass(frozen=True, slots=True)
class Header:
    """A block's number, hash and parent hash (lower-case hex), its timestamp (Unix
    seconds) and its `logsBloom` (hex, "" when the node sent none)."""

    number: int
    hash: str
    parent_hash: str
    time: int = 0
    bloom: str = ""


@dataclass(slots=True)
class RangeRead:
    """What one range held: its headers (ascending) and the transfers to our addresses,
    in block order, each with `block_number`/`block_hash` set. `rpc_calls` counts the
    JSON-RPC requests made (a batch is one)."""

    headers: list[Header]
    transfers: list[Transfer] = field(default_factory=list)
    rpc_calls: int = 0


def header_of(block: dict[str, Any]) -> Header:
    number = hex_int(block.get("number"))
    if number is None:
        raise RangeMoved("the node returned a pending block")
    return Header(
        number,
        str(block["hash"]).lower(),
        str(block["parentHash"]).lower(),
        hex_int(block.get("timestamp")) or 0,
        str(block.get("logsBloom") or ""),
    )


def address_topic(address: str) -> str:
    """The 32-byte topic holding `address` (lower-case 0x form)."""
    return "0x" + "0" * 24 + address[2:].lower()


async def read_headers(
    call: Call[Any], numbers: Sequence[int], *, full: bool = False
) -> list[dict[str, Any] | None]:
    """The blocks at `numbers` (None where the node has none), in one batch."""
    if not numbers:
        return []
    calls: list[tuple[str, list[Any]]] = [
        ("eth_getBlockByNumber", [to_hex(n), full]) for n in numbers
    ]
    blocks: list[dict[str, Any] | None] = await call(_batch_query(calls))
    return blocks


async def read_range(
    call: Call[Any],
    chain: str,
    start: int,
    end: int,
    *,
    addresses: frozenset[str],
    tokens: Sequence[str],
    address_batch: int = 500,
    memory: SpanMemory | None = None,
) -> RangeRead:
    """Blocks `start..end` (inclusive) and the transfers in them to `addresses`.

    `addresses` and `tokens` are lower-case; `memory` keeps the log span a provider
    accepted (one per chain and reader). Raises `RangeMoved` when the chain changed
    during the read, `RangeNotHeld` when the answering node lacks the range (both
    retryable), `LogsTooDense`, `RpcUnavailable`/`ChainUnavailable`/`RpcError` from `call`.
    """
    numbers = list(range(start, end + 1))
    blocks: list[dict[str, Any] | None] = []
    for i in range(0, len(numbers), BODY_BATCH):
        blocks += await read_headers(call, numbers[i : i + BODY_BATCH], full=True)
    read = RangeRead(headers=[], rpc_calls=(len(numbers) + BODY_BATCH - 1) // BODY_BATCH)
    by_number: dict[int, Header] = {}
    native: list[tuple[dict[str, Any], Header]] = []
    for block in blocks:
        if block is None:
            raise RangeMoved(f"{chain}: a block in {start}..{end} is gone")
        header = header_of(block)
        if read.headers and header.parent_hash != read.headers[-1].hash:
            raise RangeMoved(f"{chain}: block {header.number} does not chain to its parent")
        read.headers.append(header)
        by_number[header.number] = header
        for tx in block.get("transactions", []):
            to = (tx.get("to") or "").lower()
            if to in addresses and (hex_int(tx.get("value")) or 0) > 0:
                native.append((tx, header))
    logs = await _token_logs(call, chain, read, tokens, addresses, address_batch, memory)
    wanted = {str(tx["hash"]).lower() for tx, _ in native} | {
        str(log["transactionHash"]).lower() for log in logs
    }
    receipts = await _receipts(call, sorted(wanted), read)
    for tx, header in native:
        receipt = _anchored(receipts, str(tx["hash"]).lower(), header)
        if receipt.get("status") != "0x1":
            continue  # a reverted transaction moved no value
        read.transfers.append(
            Transfer(
                chain,
                str(tx["hash"]).lower(),
                NATIVE_POSITION,
                str(tx["to"]).lower(),
                None,
                hex_int(tx["value"]) or 0,
                header.number,
                header.hash,
                header.time,
            )
        )
    for log in logs:
        log_topics = [str(t).lower() for t in log.get("topics", [])]
        if len(log_topics) != 3 or log_topics[0] != TRANSFER_TOPIC:
            continue  # ERC-721 Transfer (tokenId indexed) or another event
        number = hex_int(log.get("blockNumber"))
        at = by_number.get(number if number is not None else -1)
        if at is None or str(log.get("blockHash", "")).lower() != at.hash:
            raise RangeMoved(f"{chain}: a log names a block the range does not hold")
        units = _units(log.get("data"))
        if units is None:
            continue  # not a uint256 amount: not an ERC-20 Transfer
        tx_hash = str(log["transactionHash"]).lower()
        receipt = _anchored(receipts, tx_hash, at)
        position = _position(receipt, hex_int(log.get("logIndex")))
        _same_log(chain, log, receipt["logs"][position])
        read.transfers.append(
            Transfer(
                chain,
                tx_hash,
                position,
                topic_address(log_topics[2]),
                str(log["address"]).lower(),
                units,
                at.number,
                at.hash,
                at.time,
            )
        )
    read.transfers.sort(key=lambda t: (t.block_number or 0, t.tx_hash, t.position))
    return read


async def _token_logs(
    call: Call[Any],
    chain: str,
    read: RangeRead,
    tokens: Sequence[str],
    addresses: frozenset[str],
    address_batch: int,
    memory: SpanMemory | None,
) -> list[dict[str, Any]]:
    """The registered tokens' `Transfer` logs to `addresses` in the range `read` holds,
    with "nothing there" verified block by block against the headers' blooms."""
    if not tokens or not addresses:
        return []
    start, end = read.headers[0].number, read.headers[-1].number
    ordered = sorted(addresses)
    logs: list[dict[str, Any]] = []
    batches = [ordered[i : i + address_batch] for i in range(0, len(ordered), address_batch)]
    for batch in batches:
        filters: list[Any] = [TRANSFER_TOPIC, None, [address_topic(a) for a in batch]]
        found, calls = await logs_in_range(
            call,
            chain,
            start,
            end,
            read.headers[-1].hash,
            tokens=tokens,
            topics=filters,
            memory=memory,
        )
        read.rpc_calls += calls
        logs.extend(_canonical(chain, found, read))
    with_logs = {hex_int(log.get("blockNumber")) for log in logs}
    every_topic = [address_topic(a) for a in ordered]
    suspects = [
        h
        for h in read.headers
        if h.number not in with_logs
        and may_hold_transfer(h.bloom, tokens, TRANSFER_TOPIC, every_topic)
    ]
    if not suspects:
        return logs
    for batch in batches:
        filters = [TRANSFER_TOPIC, None, [address_topic(a) for a in batch]]
        answers = await logs_by_hash(
            call, [h.hash for h in suspects], tokens=tokens, topics=filters
        )
        read.rpc_calls += 1
        for answer in answers:
            missed = _canonical(chain, answer, read)
            RECHECKED.labels(chain, "found" if missed else "none").inc()
            logs.extend(missed)
    return logs


def _canonical(chain: str, logs: list[dict[str, Any]], read: RangeRead) -> list[dict[str, Any]]:
    """`logs` without those flagged `removed` (reorged out). A removed log that names a
    block of the range as read means the node's view changed under us: `RangeMoved`
    (read again), never "that block holds nothing"."""
    held = {h.hash for h in read.headers}
    kept = []
    for log in logs:
        if log.get("removed"):
            if str(log.get("blockHash", "")).lower() in held:
                raise RangeMoved(f"{chain}: the node calls a log of a block it holds removed")
            continue
        kept.append(log)
    return kept


async def _receipts(call: Call[Any], hashes: list[str], read: RangeRead) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for i in range(0, len(hashes), RECEIPT_BATCH):
        chunk = hashes[i : i + RECEIPT_BATCH]
        calls: list[tuple[str, list[Any]]] = [("eth_getTransactionReceipt", [h]) for h in chunk]
        answers: list[Any] = await call(_batch_query(calls))
        read.rpc_calls += 1
        found.update(zip(chunk, answers, strict=True))
    return found


def _batch_query(calls: list[tuple[str, list[Any]]]) -> Callable[[RpcClient], Awaitable[list[Any]]]:
    async def query(rpc: RpcClient) -> list[Any]:
        return await rpc.batch(calls)

    return query


def _anchored(receipts: dict[str, Any], tx_hash: str, header: Header) -> dict[str, Any]:
    receipt = receipts.get(tx_hash)
    if receipt is None or str(receipt.get("blockHash", "")).lower() != header.hash:
        raise RangeMoved(f"receipt of {tx_hash} is not in block {header.number} any more")
    return dict(receipt)


def _same_log(chain: str, log: dict[str, Any], in_receipt: dict[str, Any]) -> None:
    """The `eth_getLogs` answer must say what the transaction's receipt says at that
    position (contract, topics, amount); otherwise the node contradicts itself and the
    range is read again (`RangeMoved`): an amount is never taken from one answer alone."""

    def content(item: dict[str, Any]) -> tuple[str, list[str], str]:
        return (
            str(item.get("address", "")).lower(),
            [str(t).lower() for t in item.get("topics") or []],
            str(item.get("data", "")).lower(),
        )

    if content(log) != content(in_receipt):
        raise RangeMoved(
            f"{chain}: the logs answer for {log.get('transactionHash')} disagrees with its receipt"
        )


def _units(data: object) -> int | None:
    """The uint256 in a Transfer log's data; None when it is not one 32-byte word."""
    text = str(data or "")
    if len(text) != 66 or not text.startswith("0x"):
        return None
    try:
        return int(text, 16)
    except ValueError:
        return None


def _position(receipt: dict[str, Any], log_index: int | None) -> int:
    """The index among the receipt's logs of the log with block-level `log_index`."""
    for position, log in enumerate(receipt.get("logs", [])):
        if hex_int(log.get("logIndex")) == log_index:
            return position
    raise RangeMoved(f"log {log_index} is not in its transaction's receipt")
