"""The scanner: walks new blocks from a cursor kept in PostgreSQL and
feeds every transfer to our deposit addresses into the deposit lifecycle.

One `step(chain)`:
1. head from the node; the walk goes up to `head - ETH_SCANNER_LAG_BLOCKS` (a lagging
   RPC replica behind a load balancer then cannot hide logs the head already holds);
2. no cursor yet: it starts at `ETH_SCANNER_START_BLOCK`, or at the target (older blocks
   are `payflow recon --chain`'s);
3. caught up: it only checks the cursor's block is still canonical (a reorg of the same
   height is seen without waiting for a new block); a node whose head is below the
   cursor and lacks the cursor's block is behind (a replica), not reorged: it waits;
4. otherwise it reads the next `ETH_SCANNER_BATCH_BLOCKS` blocks (`blocks.read_range`).
   The first block's parent hash must be the cursor's hash; if not, the chain reorged:
   `walk_back` finds the fork point by comparing the hashes kept in
   `chain_scanner_blocks` with the node's, newest first, never below the last finalized
   block, moves the cursor there and the next step re-scans the new branch;
5. the transfers are `observe`d (source `scanner`, seen in that block: verified at
   once) on up to `ETH_SCANNER_WRITERS` connections; then one transaction checks the
   watched addresses did not grow during the read (else the range is read again),
   moves the cursor by compare-and-set from where the step started, keeps the walked
   hashes and prunes old ones. A replica that lost the race finds the cursor moved and
   drops its step; the reports it wrote are idempotent and true (what the node showed),
   so two replicas never double-walk harmfully.

While behind, the next range is read ahead while the current one is written.

A deposit in a block a reorg removed is the lifecycle's to orphan (it checks the block
hash); re-scanning the new branch reports a re-included transfer again, and the scanner
moves the deposit to its new block at once.

Metrics: `payflow_scanner_head_lag_blocks{chain}`, `payflow_scanner_blocks_total{chain}`,
`payflow_scanner_transfers_total{chain}`, `payflow_scanner_reorgs_total{chain}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog
from prometheus_client import Counter, Gauge

from payflow.chain.deposits import ObserveOutcome, destination, observe, record_verified
from payflow.chain.finality import FinalityOracle
from payflow.chain.identity import check_node
from payflow.chain.transfers import Transfer
from payflow.chain.watch.blocks import (
    Header,
    RangeMoved,
    RangeRead,
    header_of,
    read_headers,
    read_range,
)
from payflow.chain.watch.logs import SpanMemory
from payflow.config import ChainSettings, DatabaseSettings
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.errors import RetryableError
from payflow.metrics import REGISTRY
from payflow.observability import new_trace_id

SQL = load_queries("payflow.chain.watch")
log = structlog.get_logger("payflow.chain.scanner")

HEAD_LAG = Gauge(
    "payflow_scanner_head_lag_blocks",
    "Blocks between the node's head and the scanner's cursor",
    ("chain",),
    registry=REGISTRY,
)
BLOCKS = Counter(
    "payflow_scanner_blocks_total", "Blocks the scanner walked", ("chain",), registry=REGISTRY
)
TRANSFERS = Counter(
    "payflow_scanner_transfers_total",
    "Transfers to deposit addresses the scanner found (reported to the lifecycle)",
    ("chain",),
    registry=REGISTRY,
)
REORGS = Counter(
    "payflow_scanner_reorgs_total",
    "Reorgs the scanner detected and walked back",
    ("chain",),
    registry=REGISTRY,
)


@dataclass(frozen=True, slots=True)
class Cursor:
    number: int
    hash: str


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one step did: blocks walked, transfers reported (new reports among them),
    `reorg_depth` when it walked back, `caught_up` when nothing was left to walk,
    `lost_race` when another replica moved the cursor first."""

    chain: str
    head: int
    cursor: int
    walked: int = 0
    transfers: int = 0
    new: int = 0
    reorg_depth: int | None = None
    caught_up: bool = False
    lost_race: bool = False
    read_s: float = 0.0  # time reading the node
    write_s: float = 0.0  # time in the PostgreSQL transaction


class WatchedChanged(RetryableError):
    """Deposit addresses or tokens were added while a range was read: read it again."""


@dataclass(frozen=True, slots=True)
class Watched:
    """What a read looked for: our addresses and the registered tokens of a chain, and
    how many rows both tables held (addresses are never deleted: a grown count at write
    time means the read may have missed an address, and the range is read again)."""

    addresses: frozenset[str]
    tokens: tuple[str, ...]
    count: int


class Scanner:
    """Scans every chain of `oracle` (its RPC clients and breakers) into `pool`.

    While behind, the next range is read ahead (one task per chain) while the current
    one is written, so catching up costs about max(node, database) per range, not the
    sum. `aclose()` cancels a pending read-ahead.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: ChainSettings,
        oracle: FinalityOracle,
        *,
        database: DatabaseSettings,
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.database = database  # the bounds of its transactions
        self.oracle = oracle
        self._ahead: dict[str, tuple[int, int, asyncio.Task[tuple[Watched, RangeRead]]]] = {}
        self._spans: dict[str, SpanMemory] = {}  # eth_getLogs span each provider accepts
        self.lag: dict[str, int] = {}  # chain -> blocks between the node's head and the cursor

    async def aclose(self) -> None:
        for _, _, task in self._ahead.values():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._ahead.clear()

    async def _watched_count(self, conn: Connection, chain: str) -> int:
        count: int = await conn.fetchval(SQL["watched_count"], chain)
        return count

    async def _watched(self, chain: str) -> Watched:
        async with self.pool.acquire() as conn:
            count = await self._watched_count(conn, chain)
            addresses = frozenset(
                r["address"] for r in await conn.fetch(SQL["watched_addresses"], chain)
            )
            tokens = tuple(r["contract"] for r in await conn.fetch(SQL["watched_tokens"], chain))
        return Watched(addresses, tokens, count)

    async def _read(
        self, chain: str, start: int, end: int, watched: Watched | None = None
    ) -> tuple[Watched, RangeRead]:
        """The range `start..end`: from the read-ahead when it is that range, else now."""
        ahead = self._ahead.pop(chain, None)
        if ahead is not None:
            a_start, a_end, task = ahead
            if (a_start, a_end) == (start, end):
                try:
                    return await task
                except RetryableError:
                    pass  # read it again below
            else:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        return await self._fetch(chain, start, end, watched)

    async def _fetch(
        self, chain: str, start: int, end: int, watched: Watched | None = None
    ) -> tuple[Watched, RangeRead]:
        # Counted BEFORE the read: an address added during the read grows the count.
        watched = watched or await self._watched(chain)
        read = await read_range(
            self._call(chain),
            chain,
            start,
            end,
            addresses=watched.addresses,
            tokens=watched.tokens,
            address_batch=self.settings.eth_scanner_address_batch,
            memory=self._spans.setdefault(chain, SpanMemory()),
        )
        return watched, read

    def _call(self, chain: str) -> Any:
        async def call(fn: Any) -> Any:
            return await self.oracle.call(chain, fn)

        return call

    async def step(self, chain: str) -> StepResult:
        """One step on `chain` (see the module docstring). Raises `RetryableError`s
        (node down, breaker open, chain moved under the read, database busy), and
        `NodeMisconfigured` when the node is another network or lacks the policy's tag
        (nothing is walked then)."""
        await check_node(self.pool, self.oracle, chain)
        call = self._call(chain)
        head: int = await call(lambda rpc: rpc.block_number())
        target = head - self.settings.eth_scanner_lag_blocks
        cursor = await self._cursor(chain, target)
        if cursor is None:
            return StepResult(chain, head, -1, caught_up=True)
        self._lag(chain, head, cursor.number)
        if cursor.number >= target:
            [block] = await read_headers(call, [cursor.number])
            if block is not None and header_of(block).hash == cursor.hash:
                return StepResult(chain, head, cursor.number, caught_up=True)
            if block is None and head < cursor.number:
                # The answering node is behind the cursor (eth_blockNumber went back: a
                # replica behind a load balancer). Not a reorg: nothing to walk back;
                # a real reorg shows once the node has a block at the cursor's height.
                log.info(
                    "payflow.scanner.node_behind", chain=chain, head=head, cursor=cursor.number
                )
                return StepResult(chain, head, cursor.number, caught_up=True)
            return await self.walk_back(chain, cursor, head)
        end = min(cursor.number + self.settings.eth_scanner_batch_blocks, target)
        started = time.perf_counter()
        watched, read = await self._read(chain, cursor.number + 1, end)
        if read.headers[0].parent_hash != cursor.hash:
            return await self.walk_back(chain, cursor, head)
        if end < target:  # read the next range while this one is written
            ahead_end = min(end + self.settings.eth_scanner_batch_blocks, target)
            self._ahead[chain] = (
                end + 1,
                ahead_end,
                asyncio.create_task(self._fetch(chain, end + 1, ahead_end, watched)),
            )
        read_s = time.perf_counter() - started
        started = time.perf_counter()
        new = await self._report_all(read.transfers)
        async with self.pool.acquire() as conn, transaction(conn, self.database):
            last = read.headers[-1]
            if await self._watched_count(conn, chain) != watched.count:
                # An address or token was added after the read took its snapshot: read
                # the range again with it (the cursor stays).
                raise WatchedChanged(f"{chain}: the watched addresses or tokens changed")
            moved = await conn.fetchval(
                SQL["move_cursor"], chain, cursor.number, cursor.hash, last.number, last.hash, 0
            )
            if moved is None:
                return StepResult(chain, head, cursor.number, lost_race=True)
            await self._keep(conn, chain, read.headers)
        write_s = time.perf_counter() - started
        BLOCKS.labels(chain).inc(len(read.headers))
        TRANSFERS.labels(chain).inc(len(read.transfers))
        self._lag(chain, head, end)
        return StepResult(
            chain,
            head,
            end,
            walked=len(read.headers),
            transfers=len(read.transfers),
            new=new,
            read_s=read_s,
            write_s=write_s,
        )

    def _lag(self, chain: str, head: int, cursor: int) -> None:
        self.lag[chain] = max(head - cursor, 0)
        HEAD_LAG.labels(chain).set(self.lag[chain])

    async def _report_all(self, transfers: list[Transfer]) -> int:
        """Observe `transfers` on up to `ETH_SCANNER_WRITERS` connections at once, one
        transaction per slice; how many were new reports. Committed BEFORE the cursor
        moves: a crash or a lost race in between only repeats idempotent reports."""
        if not transfers:
            return 0
        writers = max(1, min(self.settings.eth_scanner_writers, len(transfers) // 8 or 1))
        slices = [transfers[i::writers] for i in range(writers)]

        async def write(part: list[Transfer]) -> int:
            async with self.pool.acquire() as conn, transaction(conn, self.database):
                return sum([await self._report(conn, t) for t in part])

        return sum(await asyncio.gather(*(write(part) for part in slices)))

    async def _report(self, conn: Connection, transfer: Transfer) -> int:
        """Observe one transfer the node showed; 1 when it is a new report."""
        assert transfer.block_number is not None and transfer.block_hash is not None
        block = (transfer.block_number, transfer.block_hash)
        result = await observe(
            conn,
            transfer,
            source="scanner",
            trace_id=new_trace_id(),
            seen_in_block=block,
            assignment_slack_s=self.settings.chain_assignment_slack_s,
        )
        if result.outcome is ObserveOutcome.DUPLICATE and result.transfer_id is not None:
            # Reported before, maybe from a block a reorg replaced: the node shows it
            # here now, so the deposit (unless credited) moves to this block.
            found = await destination(conn, transfer.chain, transfer.to_address, transfer.contract)
            if not isinstance(found, str):
                await record_verified(
                    conn,
                    transfer_id=result.transfer_id,
                    transfer=transfer,
                    destination=found,
                    block=block,
                    source="scanner",
                    trace_id=None,
                )
        return 1 if result.outcome is ObserveOutcome.NEW else 0

    async def _keep(self, conn: Connection, chain: str, headers: list[Header]) -> None:
        await conn.execute(
            SQL["insert_blocks"],
            chain,
            [h.number for h in headers],
            [h.hash for h in headers],
            [h.parent_hash for h in headers],
        )
        keep_from = headers[-1].number - self.settings.eth_scanner_keep_blocks
        await conn.execute(SQL["prune_blocks"], chain, keep_from)

    async def _cursor(self, chain: str, target: int) -> Cursor | None:
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(SQL["get_cursor"], chain)
        if row is not None:
            return Cursor(row["block_number"], row["block_hash"])
        first = self.settings.eth_scanner_start_block
        start = target if first is None else min(first, target)
        if start < 0:
            return None
        # The cursor is the last walked block: starting AT `start` means standing before it.
        number = max(start - 1, 0)
        [block] = await read_headers(self._call(chain), [number])
        if block is None:
            raise RangeMoved(f"{chain}: no block {number} to start from")
        header = header_of(block)
        async with self.pool.acquire() as conn, transaction(conn, self.database):
            await conn.execute(SQL["init_cursor"], chain, header.number, header.hash)
            await self._keep(conn, chain, [header])
            row = await conn.fetchrow(SQL["get_cursor"], chain)
        assert row is not None
        log.info("payflow.scanner.cursor_created", chain=chain, block=row["block_number"])
        return Cursor(row["block_number"], row["block_hash"])

    async def walk_back(self, chain: str, cursor: Cursor, head: int) -> StepResult:
        """The chain no longer holds the cursor's block: find the fork point (the newest
        kept block whose hash the node still has at that height), never below the last
        finalized block, and move the cursor there; the next step re-scans. The node is
        checked first, uncached (`NodeMisconfigured`: another network, nothing moves)."""
        # A cursor block the node no longer has may be a reorg, or an endpoint swapped
        # to another network behind the RPC URL: ask its chain id again before moving
        # the cursor (the cached check is up to CHAIN_IDENTITY_RECHECK_S old).
        await check_node(self.pool, self.oracle, chain, force=True)
        call = self._call(chain)
        # Never below the last finalized block, and never above the cursor (a cursor
        # already below finality re-anchors where it stands: no block is ever skipped).
        floor = min(max(await self.oracle.finalized_height(chain), 0), cursor.number)
        async with self.pool.acquire() as conn:
            kept = await conn.fetch(SQL["recent_blocks"], chain, floor, cursor.number)
        fork: Cursor | None = None
        for i in range(0, len(kept), 100):
            chunk = kept[i : i + 100]
            blocks = await read_headers(call, [r["block_number"] for r in chunk])
            for row, block in zip(chunk, blocks, strict=True):
                if block is not None and header_of(block).hash == row["block_hash"]:
                    fork = Cursor(row["block_number"], row["block_hash"])
                    break
            if fork is not None:
                break
        if fork is None:
            # Nothing kept above the finalized block survived: restart from that block,
            # which no reorg may replace (if it differs from ours, say so loudly).
            [block] = await read_headers(call, [floor])
            if block is None:
                raise RangeMoved(f"{chain}: no finalized block {floor}")
            fork = Cursor(floor, header_of(block).hash)
            if any(r["block_number"] == floor and r["block_hash"] != fork.hash for r in kept):
                log.error("payflow.scanner.reorg_below_finality", chain=chain, block=floor)
        async with self.pool.acquire() as conn, transaction(conn, self.database):
            moved = await conn.fetchval(
                SQL["move_cursor"], chain, cursor.number, cursor.hash, fork.number, fork.hash, 1
            )
            if moved is None:
                return StepResult(chain, head, cursor.number, lost_race=True)
            await conn.execute(SQL["drop_blocks_above"], chain, fork.number)
        depth = cursor.number - fork.number
        REORGS.labels(chain).inc()
        self._lag(chain, head, fork.number)
        log.warning(
            "payflow.scanner.reorg",
            chain=chain,
            depth=depth,
            fork=fork.number,
            cursor=cursor.number,
        )
        return StepResult(chain, head, fork.number, reorg_depth=depth)

    async def catch_up(self, chain: str, *, max_steps: int = 100_000) -> list[StepResult]:
        """Step until caught up (tests, the benchmark, `payflow scanner --once`)."""
        results = []
        try:
            for _ in range(max_steps):
                result = await self.step(chain)
                results.append(result)
                if result.caught_up:
                    break
        finally:
            await self.aclose()
        return results
