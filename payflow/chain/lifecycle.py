"""The deposit lifecycle, driven by the scheduler job `chain_deposits`.

Each run, per chain with an RPC configured, in batches (`CHAIN_DEPOSITS_BATCH`):
1. pending reports → verified against the node (`verify_claim`): a match records or
   refreshes the deposit (the node's content) and confirms the report; a refutation is
   kept with its reason. A report whose transaction the node does not know is retried
   until `CHAIN_REPORT_GRACE_S` has passed (it may not be mined yet), then refuted; one
   whose block the node cannot give a header for (a replica behind) waits: the
   assignment rule needs that block's time.
2. verified deposits → final (block at that height still has the recorded hash and is
   final under the chain's policy) → credited: a compare-and-set to `credited` and the
   payment event `chain:<transfer id>` (`ledger.accounts.record_and_announce`) commit together, then
   `post_event` posts it (the outbox's `ledger.event` replays harmlessly). A block
   hash that changed: the receipt elsewhere → moved; no receipt → orphaned.
3. orphaned deposits, and credited ones a deep reorg reversed, are re-checked for
   `CHAIN_ORPHAN_RECHECK_S`: re-included → verified at the new block (same deposit, one
   credit once final; a reversed one is credited again under `chain:<id>~<n>`).
0. before all that, per chain, `identity.check_node` (asked every run): a node of another network or
   without the policy's `finalized` tag stops that chain (`stats.stopped`, the alert
   `chain.node:<chain>`); the other chains run.
4. confirmations chains: credited deposits within `CHAIN_REORG_WATCH_BLOCKS` of head are
   watched; a reorg that removed them → `reversal.reverse`. Only ANOTHER block at the
   deposit's height proves a reorg: a node with no block there (a lagging replica) moves
   no money, and no verified deposit is orphaned on it either.

Every RPC read goes through the oracle's breaker: `ChainUnavailable` stops that chain
for this run and everything waits (nothing fails). RPC runs with no transaction open;
each decision is a short transaction with a compare-and-set on the status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import asyncpg
import structlog

from payflow.alerts import AlertSink, Severity
from payflow.chain.config import PolicyKind
from payflow.chain.deposit_events import record_deposit_event
from payflow.chain.deposits import BEFORE_ASSIGNMENT, SQL, destination, record_verified
from payflow.chain.finality import FinalityOracle
from payflow.chain.identity import NodeMisconfigured, check_node
from payflow.chain.identity import alert_key as node_alert_key
from payflow.chain.reversal import reverse
from payflow.chain.transfers import Transfer
from payflow.chain.verify import Missing, Truth, verify_claim
from payflow.config import ChainSettings, DatabaseSettings
from payflow.db import Connection
from payflow.db.tx import transaction
from payflow.errors import ChainUnavailable
from payflow.ledger.accounts import asset_scale, record_and_announce
from payflow.ledger.moves import post_reorg_recovery
from payflow.ledger.posting import post_event
from payflow.ledger.records import EventType
from payflow.money import format_amount
from payflow.webhooks import EventKind

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
    reincluded: int = 0
    waiting: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)  # one line per misconfigured chain

    def summary(self) -> str:
        text = (
            f"confirmed={self.confirmed} refuted={self.refuted} credited={self.credited} "
            f"orphaned={self.orphaned} moved={self.moved} reversed={self.reversed}"
        )
        if self.reincluded:
            text += f" reincluded={self.reincluded}"
        text += f" waiting={','.join(self.waiting)}" if self.waiting else ""
        return text + "".join(f"; STOPPED {line}" for line in self.stopped)


def credit_event_id(tid: str, generation: int = 0) -> str:
    """The payment event of a deposit's credit: `chain:<transfer id>` (no provider
    namespace starts with `chain:`); `chain:<transfer id>~<n>` for the n-th credit
    again of a transfer a deep reorg removed (reversed) and the chain gave back."""
    return f"chain:{tid}" if generation == 0 else f"chain:{tid}~{generation}"


def _backoff(settings: ChainSettings, checks: int) -> float:
    return float(min(settings.chain_recheck_s * (2 ** min(checks, 10)), MAX_BACKOFF_S))


async def process_deposits(
    pool: asyncpg.Pool,
    settings: ChainSettings,
    oracle: FinalityOracle,
    alerts: AlertSink,
    *,
    database: DatabaseSettings,
) -> LifecycleStats:
    """One pass of the lifecycle over every configured chain; see the module docstring.
    `settings` is the chain slice; every transaction keeps `database`'s bounds."""
    stats = LifecycleStats()
    for chain, config in oracle.configs.items():
        try:
            # Asked again every run (not the scanner's cached check): the endpoint
            # behind the RPC URL may have been swapped since the last run.
            await check_node(pool, oracle, chain, force=True)
        except NodeMisconfigured as error:
            stats.stopped.append(str(error))
            await alerts.fire(node_alert_key(chain), Severity.CRITICAL, str(error))
            continue
        except ChainUnavailable as error:
            stats.waiting.append(chain)
            log.warning("payflow.chain.waiting", chain=chain, error=str(error))
            continue
        await alerts.resolve(node_alert_key(chain))
        try:
            await _reports(pool, settings, oracle, chain, stats, database)
            await _deposits(pool, settings, oracle, chain, stats, database)
            if config.policy.kind is PolicyKind.CONFIRMATIONS:
                await _watch_credits(pool, settings, oracle, alerts, chain, stats, database)
        except ChainUnavailable as error:
            stats.waiting.append(chain)
            log.warning("payflow.chain.waiting", chain=chain, error=str(error))
    return stats


async def _reports(
    pool: asyncpg.Pool,
    settings: ChainSettings,
    oracle: FinalityOracle,
    chain: str,
    stats: LifecycleStats,
    database: DatabaseSettings,
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
        block_time = None
        if isinstance(found, Truth):  # read before the transaction opens
            block_time = await oracle.block_time(chain, found.block_hash)
        async with pool.acquire() as conn, transaction(conn, database):
            if isinstance(found, Truth) and block_time is None:
                # The receipt names a block the answering node (a replica) does not hold
                # yet: without its time the assignment rule cannot be applied. Wait.
                await conn.execute(
                    SQL["reschedule_report"], row["id"], _backoff(settings, row["checks"])
                )
            elif isinstance(found, Truth):
                if await _confirm(conn, settings, row, found, block_time):
                    stats.confirmed += 1
                else:
                    stats.refuted += 1
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


async def _confirm(
    conn: Connection,
    settings: ChainSettings,
    row: asyncpg.Record,
    truth: Truth,
    block_time: int | None,
) -> bool:
    """Record the deposit the node showed for report `row`; False when the report is
    refuted instead (the address or token is not ours any more, or the transfer came
    before the address was assigned: the assignment rule, as the scanner and recon)."""
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
        return False
    if found.before_assignment(block_time, settings.chain_assignment_slack_s):
        reason = f"not creditable: {BEFORE_ASSIGNMENT} (block {truth.block_number} is older"
        reason += " than the deposit address's assignment)"
        await conn.execute(SQL["refute_report"], row["id"], reason)
        log.warning("payflow.chain.report_refuted", report_id=row["id"], reason=reason)
        return False
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
    return True


async def _deposits(
    pool: asyncpg.Pool,
    settings: ChainSettings,
    oracle: FinalityOracle,
    chain: str,
    stats: LifecycleStats,
    database: DatabaseSettings,
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
                if await credit(pool, database, row):
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
        async with pool.acquire() as conn, transaction(conn, database):
            if where is not None and row["status"] == "reversed":
                # The transfer a deep reorg removed is back: verified at its new block,
                # credited again (under the next event id) once that block is final.
                await conn.execute(SQL["reinclude_reversed"], row["transfer_id"], *where)
                await record_deposit_event(conn, EventKind.DEPOSIT_PENDING, row["transfer_id"])
                stats.reincluded += 1
                log.warning("payflow.chain.reincluded", transfer_id=row["transfer_id"])
            elif where is not None:
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
                    row["status"],  # orphaned or reversed: still gone
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


async def credit(pool: asyncpg.Pool, settings: DatabaseSettings, row: Any) -> bool:
    """Credit a verified deposit found final at its recorded block, exactly once:
    compare-and-set to credited + the payment event and its outbox row in one
    transaction, then `post_event` (idempotent). False when something else moved it."""
    tid = row["transfer_id"]
    async with pool.acquire() as conn, transaction(conn, settings):
        generation = await conn.fetchval(SQL["credit_generation"], tid)
        event_id = credit_event_id(tid, int(generation or 0))
        marked = await conn.fetchrow(SQL["mark_credited"], tid, event_id, row["block_hash"])
        if marked is None:
            return False
        # the shortfall its reversal booked as payflow's loss is on chain again
        await post_reorg_recovery(conn, event_id, tid, marked["recovered"])
        await record_deposit_event(
            conn, EventKind.DEPOSIT_CREDITED, tid, credited=max(marked["amount"], Decimal(0))
        )
        if marked["amount"] <= 0:  # a re-credit of a reversal that debited nothing
            log.info("payflow.chain.credited", transfer_id=tid, event_id=None)
            return True
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
    settings: ChainSettings,
    oracle: FinalityOracle,
    alerts: AlertSink,
    chain: str,
    stats: LifecycleStats,
    database: DatabaseSettings,
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
        current = await oracle.block_hash(chain, row["block_number"])
        if current is None or current == row["block_hash"]:
            # Only another block at that height proves a reorg; none at all is a node
            # (replica) behind, or a chain shorter for now: decided when it has one.
            continue
        where = await _where_now(oracle, row)
        if where is not None:
            async with pool.acquire() as conn:
                await conn.execute(SQL["move_block"], row["transfer_id"], "credited", *where)
            stats.moved += 1
            continue
        if await reverse(pool, database, alerts, row["transfer_id"]):
            stats.reversed += 1
