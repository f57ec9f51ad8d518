"""The deposit lifecycle, driven by the scheduler job `chain_deposits` (issue 8).

Each run, per chain with an RPC configured, in batches (`CHAIN_DEPOSITS_BATCH`):
1. pending reports → verified against the node (`verify_claim`): a match records or
   refreshes the deposit (the node's content) and confirms the report; a refutation is
   kept with its reason. A report whose transaction the node does not know is retried
   until `CHAIN_REPORT_GRACE_S` has passed (it may not be mined yet), then refuted.
2. verified deposits → final (block at that height still has the recorded hash and is
   final under the chain's policy) → credited: a compare-and-set to `credited` and the
   payment event `chain:<transfer id>` (`record_and_announce`) commit together, then
   `post_event` posts it (the outbox's `ledger.event` replays harmlessly). A block
   hash that changed: the receipt elsewhere → moved; no receipt → orphaned.
3. orphaned deposits are re-checked for `CHAIN_ORPHAN_RECHECK_S`: re-included → verified
   at the new block (same deposit, one credit once final).
4. confirmations chains: credited deposits within `CHAIN_REORG_WATCH_BLOCKS` of head are
   watched; a reorg that removed them → `reversal.reverse`.

Every RPC read goes through the oracle's breaker: `ChainUnavailable` stops that chain
for this run and everything waits (nothing fails). RPC runs with no transaction open;
each decision is a short transaction with a compare-and-set on the status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import asyncpg
import structlog

from payflow.chain.config import PolicyKind
from payflow.chain.deposits import SQL, destination, record_verified
from payflow.chain.finality import FinalityOracle
from payflow.chain.reversal import reverse
from payflow.chain.transfers import Transfer
from payflow.chain.verify import Missing, Truth, verify_claim
from payflow.config import Settings
from payflow.db import Connection
from payflow.db.tx import transaction
from payflow.errors import ChainUnavailable
from payflow.ingress.service import record_and_announce
from payflow.ledger.accounts import asset_scale
from payflow.ledger.posting import post_event
from payflow.ledger.records import EventType
from payflow.money import format_amount
from payflow.ops.alerts import AlertSink

log = structlog.get_logger("payflow.chain.lifecycle")
MAX_BACKOFF_S = 300.0


@dataclass(slots=True)
class LifecycleStats:
    """What one run did, per kind of step; `waiting` lists chains whose node was down."""

    confirmed: int = 0
    refuted: int = 0
    credited: int = 0
    orphaned: int = 0
    moved: int = 0
    reversed: int = 0
    waiting: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = (
            f"confirmed={self.confirmed} refuted={self.refuted} credited={self.credited} "
            f"orphaned={self.orphaned} moved={self.moved} reversed={self.reversed}"
        )
        return text + (f" waiting={','.join(self.waiting)}" if self.waiting else "")


def credit_event_id(tid: str) -> str:
    """The payment event of a deposit's credit: `chain:<transfer id>` (no provider
    namespace starts with `chain:`)."""
    return f"chain:{tid}"


def _backoff(settings: Settings, checks: int) -> float:
    return float(min(settings.chain_recheck_s * (2 ** min(checks, 10)), MAX_BACKOFF_S))


async def process_deposits(
    pool: asyncpg.Pool, settings: Settings, oracle: FinalityOracle, alerts: AlertSink
) -> LifecycleStats:
    """One pass of the lifecycle over every configured chain; see the module docstring."""
    stats = LifecycleStats()
    for chain, config in oracle.configs.items():
        try:
            await _reports(pool, settings, oracle, chain, stats)
            await _deposits(pool, settings, oracle, chain, stats)
            if config.policy.kind is PolicyKind.CONFIRMATIONS:
                await _watch_credits(pool, settings, oracle, alerts, chain, stats)
        except ChainUnavailable as error:
            stats.waiting.append(chain)
            log.warning("payflow.chain.waiting", chain=chain, error=str(error))
    return stats


async def _reports(
    pool: asyncpg.Pool,
    settings: Settings,
    oracle: FinalityOracle,
    chain: str,
    stats: LifecycleStats,
) -> None:
    async with pool.acquire() as conn:
        rows = await conn.fetch(SQL["due_reports"], [chain], settings.chain_deposits_batch)
    for row in rows:
        found = await verify_claim(
            oracle,
            chain,
            row["tx_hash"],
            to_address=row["to_address"],
            contract=row["contract"],
            units=int(row["units"]),
            position=row["position"],
            log_index=row["log_index"],
        )
        async with pool.acquire() as conn, transaction(conn, settings):
            if isinstance(found, Truth):
                await _confirm(conn, row, found)
                stats.confirmed += 1
            elif isinstance(found, Missing) and row["age_s"] < settings.chain_report_grace_s:
                await conn.execute(
                    SQL["reschedule_report"], row["id"], _backoff(settings, row["checks"])
                )
            else:
                reason = found if isinstance(found, str) else "no such transaction on the chain"
                await conn.execute(SQL["refute_report"], row["id"], reason)
                stats.refuted += 1
                log.warning(
                    "payflow.chain.report_refuted",
                    report_id=row["id"],
                    tx_hash=row["tx_hash"],
                    reason=reason,
                    trace_id=row["trace_id"],
                )


async def _confirm(conn: Connection, row: asyncpg.Record, truth: Truth) -> None:
    transfer = Transfer(
        row["chain"],
        row["tx_hash"],
        truth.position,
        truth.to_address,
        truth.contract,
        truth.units,
        truth.block_number,
        truth.block_hash,
    )
    found = await destination(conn, transfer.chain, transfer.to_address, transfer.contract)
    if isinstance(found, str):  # the address or token was unregistered meanwhile
        await conn.execute(SQL["refute_report"], row["id"], f"not ours any more: {found}")
        return
    tid = transfer.id
    await record_verified(
        conn,
        transfer_id=tid,
        transfer=transfer,
        destination=found,
        block=(truth.block_number, truth.block_hash),
        source=row["source"],
        trace_id=row["trace_id"],
    )
    await conn.execute(SQL["confirm_report"], row["id"], tid)


async def _deposits(
    pool: asyncpg.Pool,
    settings: Settings,
    oracle: FinalityOracle,
    chain: str,
    stats: LifecycleStats,
) -> None:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            SQL["due_deposits"],
            [chain],
            settings.chain_deposits_batch,
            settings.chain_orphan_recheck_s,
        )
    for row in rows:
        if row["status"] == "verified":
            final = await oracle.is_final(chain, row["block_number"], row["block_hash"])
            if final is True:
                if await credit(pool, settings, row):
                    stats.credited += 1
                continue
            if final is None:
                async with pool.acquire() as conn:
                    await conn.execute(
                        SQL["reschedule_deposit"],
                        row["transfer_id"],
                        "verified",
                        settings.chain_recheck_s,
                    )
                continue
        where = await _where_now(oracle, row)
        async with pool.acquire() as conn, transaction(conn, settings):
            if where is not None:
                await conn.execute(SQL["move_block"], row["transfer_id"], row["status"], *where)
                stats.moved += 1
            elif row["status"] == "verified":
                await conn.execute(
                    SQL["mark_orphaned"], row["transfer_id"], settings.chain_recheck_s
                )
                stats.orphaned += 1
                log.warning("payflow.chain.orphaned", transfer_id=row["transfer_id"])
            else:
                await conn.execute(
                    SQL["reschedule_deposit"],
                    row["transfer_id"],
                    "orphaned",
                    _backoff(settings, row["checks"]),
                )


async def _where_now(oracle: FinalityOracle, row: Any) -> tuple[int, str] | None:
    """The block the node shows the deposit's transfer in now (None: gone)."""
    found = await verify_claim(
        oracle,
        row["chain"],
        row["tx_hash"],
        to_address=row["to_address"],
        contract=row["contract"],
        units=int(row["units"]),
        position=row["position"],
    )
    return (found.block_number, found.block_hash) if isinstance(found, Truth) else None


async def credit(pool: asyncpg.Pool, settings: Settings, row: Any) -> bool:
    """Credit a verified deposit found final at its recorded block, exactly once:
    compare-and-set to credited + the payment event and its outbox row in one
    transaction, then `post_event` (idempotent). False when something else moved it."""
    tid = row["transfer_id"]
    event_id = credit_event_id(tid)
    async with pool.acquire() as conn, transaction(conn, settings):
        marked = await conn.fetchrow(SQL["mark_credited"], tid, event_id, row["block_hash"])
        if marked is None:
            return False
        await record_and_announce(
            conn,
            event_id=event_id,
            account_id=marked["account_id"],
            amount=format_amount(marked["amount"]),
            event_type=EventType.DEPOSIT,
            scale=await asset_scale(conn, marked["asset"]),
            trace_id=marked["trace_id"] or event_id,
        )
    log.info("payflow.chain.credited", transfer_id=tid, event_id=event_id)
    await post_event(pool, settings, event_id)
    return True


async def _watch_credits(
    pool: asyncpg.Pool,
    settings: Settings,
    oracle: FinalityOracle,
    alerts: AlertSink,
    chain: str,
    stats: LifecycleStats,
) -> None:
    head = await oracle.head(chain)
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            SQL["watched_credits"],
            chain,
            head - settings.chain_reorg_watch_blocks,
            settings.chain_deposits_batch,
        )
    for row in rows:
        if await oracle.block_hash(chain, row["block_number"]) == row["block_hash"]:
            continue
        where = await _where_now(oracle, row)
        if where is not None:
            async with pool.acquire() as conn:
                await conn.execute(SQL["move_block"], row["transfer_id"], "credited", *where)
            stats.moved += 1
            continue
        if await reverse(pool, settings, alerts, row["transfer_id"]):
            stats.reversed += 1
