"""Landing provider events: registry checks, address mapping, pending payment events,
outbox rows, and everything else kept for review.

The caller owns the transaction: every event of one delivery, its outbox row and any
unmatched record commit together, or nothing does. Nothing here raises on what a
provider sent: an event is either recorded, a duplicate, or kept as unmatched.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation, localcontext
from enum import StrEnum
from uuid import UUID

import asyncpg

from payflow.chain.deposits import ObserveOutcome, ObserveResult, observe, recheck_transaction
from payflow.chain.transfers import NATIVE_POSITION, TX_HASH_RE, Transfer
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.errors import Conflict
from payflow.ingress.ids import ALCHEMY
from payflow.ingress.payloads import ProviderEvent, UnmatchedReason, ambiguous
from payflow.ingress.registry import RegisteredAsset, UnknownToken, resolve_asset
from payflow.ledger.accounts import asset_scale
from payflow.ledger.limits import LimitExceeded, LimitKind, check_limit
from payflow.money import (
    EXACT,
    InvalidAmount,
    format_amount,
    from_base_units,
    parse_amount,
    to_base_units,
)

SQL = load_queries("payflow.ingress")


class IngressResult(StrEnum):
    RECORDED = "recorded"
    DUPLICATE = "duplicate"
    UNMATCHED = "unmatched"


@dataclass(frozen=True, slots=True)
class Landing:
    """The outcome of one event: the id it is stored under (a payment event's, or the
    unmatched row's), the result, and the unmatched reason when there is one."""

    event_id: str
    result: IngressResult
    reason: UnmatchedReason | None = None


class Delivery:
    """The exact bytes of one signed delivery, stored (once per digest) only when one of
    its events is kept for review; unmatched rows point at it with their position."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sha256 = hashlib.sha256(body).digest()
        self._kept = False

    async def keep(self, conn: asyncpg.Connection) -> bytes:
        """Store the body in `provider_deliveries` (first call only); its digest."""
        if not self._kept:
            await conn.execute(SQL["keep_delivery"], self.sha256, self.body)
            self._kept = True
        return self.sha256


def _amount_text(event: ProviderEvent, decimals: int | None) -> str | None:
    """The event's amount as decimal text, for crediting or for review."""
    if event.units is None:
        return event.amount
    if decimals is None or not 0 <= decimals <= 77:
        return None
    return format_amount(from_base_units(event.units, decimals))


def _is_zero(text: str) -> bool:
    with localcontext(EXACT):
        try:
            return Decimal(text) == 0
        except (InvalidOperation, ValueError):
            return False


async def _unmatched(
    conn: asyncpg.Connection,
    event: ProviderEvent,
    reason: UnmatchedReason,
    detail: str | None,
    trace_id: str,
    delivery: Delivery,
    decimals: int | None = None,
) -> Landing:
    """Keep `event` for review. An id already kept for a different payload (another
    activity, not a redelivery) is never merged: this one is kept as `ambiguous_id`."""
    inserted = await conn.fetchval(
        SQL["insert_unmatched"],
        event.event_id,
        reason.value,
        event.chain,
        event.to_address,
        event.asset,
        _amount_text(event, decimals if decimals is not None else event.decimals),
        event.tx_hash,
        event.payload,
        trace_id,
        await delivery.keep(conn),
        event.position,
        detail,
    )
    if inserted is None and event.problem is not UnmatchedReason.AMBIGUOUS_ID:
        stored = await conn.fetchval(SQL["unmatched_payload"], event.event_id)
        if stored != event.payload:
            other = ambiguous(event, f"id {event.event_id} is kept for another activity")
            return await _unmatched(
                conn,
                other,
                UnmatchedReason.AMBIGUOUS_ID,
                other.detail,
                trace_id,
                delivery,
                decimals,
            )
    return Landing(event.event_id, IngressResult.UNMATCHED, reason)


async def land_event(
    conn: asyncpg.Connection, event: ProviderEvent, trace_id: str, *, delivery: Delivery
) -> Landing:
    """Report one provider deposit for the chain to verify, or keep it for review.

    The asset and decimals come from the registry (`resolve_asset`), the account from
    `deposit_addresses`; the account's asset must equal the registry's, and the amount
    respects the deposit limit. A creditable event is then only OBSERVED
    (`payflow.chain.deposits.observe`): the node is the source of truth, and the
    deposit lifecycle credits it once the node shows it final. The same claim
    again is a duplicate; a provider id reused for another claim is kept as
    `ambiguous_id`. A `removed: true` activity brings its transaction's deposits
    forward for re-verification. Never raises on the event's content.
    """
    if event.problem is not None:
        if event.problem is UnmatchedReason.REMOVED and event.tx_hash:
            # a reorg removed the log: the chain decides again, now (never a debit here)
            await recheck_transaction(conn, event.chain, event.tx_hash)
        return await _unmatched(conn, event, event.problem, event.detail, trace_id, delivery)
    try:
        registered: RegisteredAsset = await resolve_asset(conn, event)
    except UnknownToken as unknown:
        return await _unmatched(conn, event, unknown.reason, unknown.detail, trace_id, delivery)
    amount = _amount_text(event, registered.decimals)
    assert amount is not None  # every creditable event has units or an amount

    async def keep(reason: UnmatchedReason, detail: str) -> Landing:
        return await _unmatched(
            conn, event, reason, detail, trace_id, delivery, registered.decimals
        )

    row = await conn.fetchrow(SQL["resolve_address"], event.chain, event.to_address)
    if row is None:
        return await keep(UnmatchedReason.UNKNOWN_ADDRESS, "no account has this deposit address")
    if row["asset"] != registered.asset:
        return await keep(
            UnmatchedReason.ASSET_MISMATCH,
            f"the address holds {row['asset']}, the transfer moved {registered.asset}",
        )
    scale = min(await asset_scale(conn, row["asset"]), registered.decimals)
    try:
        value = parse_amount(amount, scale)
    except InvalidAmount as error:
        if _is_zero(amount):
            return await keep(UnmatchedReason.ZERO_VALUE, "nothing was transferred")
        return await keep(UnmatchedReason.INVALID, f"amount: {error}")
    try:
        await check_limit(conn, row["asset"], LimitKind.DEPOSIT, value)
    except LimitExceeded as error:
        return await keep(UnmatchedReason.OVER_LIMIT, str(error))
    result = await _observe(conn, event, value, registered, trace_id)
    if result is None:
        return await keep(UnmatchedReason.INVALID, "tx_hash is not an EVM transaction hash")
    if result.outcome is ObserveOutcome.NEW:
        return Landing(event.event_id, IngressResult.RECORDED)
    if result.outcome is ObserveOutcome.DUPLICATE:
        return Landing(event.event_id, IngressResult.DUPLICATE)
    if result.outcome is ObserveOutcome.AMBIGUOUS:
        other = ambiguous(event, f"id {event.event_id} already names a different movement")
        return await _unmatched(
            conn,
            other,
            UnmatchedReason.AMBIGUOUS_ID,
            other.detail,
            trace_id,
            delivery,
            registered.decimals,
        )
    reason = UnmatchedReason(result.reason or UnmatchedReason.INVALID.value)
    return await keep(reason, f"not a deposit payflow takes: {result.reason}")


def _log_index(event: ProviderEvent) -> int | None:
    """The block-level log index an Alchemy activity names (a hint for the position)."""
    activity = event.payload if isinstance(event.payload, dict) else {}
    log = activity.get("log")
    raw = log.get("logIndex") if isinstance(log, dict) else None
    if isinstance(raw, str) and raw.startswith("0x"):
        try:
            value = int(raw, 16)
        except ValueError:
            return None
        return value if value < 2**31 else None  # only a hint; odd values are dropped
    return None


async def _observe(
    conn: asyncpg.Connection,
    event: ProviderEvent,
    value: Decimal,
    registered: RegisteredAsset,
    trace_id: str,
) -> ObserveResult | None:
    """Record the deposit as a REPORT for the chain to verify (`payflow.chain.deposits`):
    a provider's word never credits by itself. None when the event names no EVM
    transaction."""
    tx_hash = (event.tx_hash or "").lower()
    if not TX_HASH_RE.fullmatch(tx_hash) or event.to_address is None:
        return None
    transfer = Transfer(
        chain=event.chain,
        tx_hash=tx_hash,
        position=NATIVE_POSITION,
        to_address=event.to_address,
        contract=None if event.native else event.contract,
        units=to_base_units(value, registered.decimals),
    )
    return await observe(
        conn,
        transfer,
        source="alchemy" if event.source == ALCHEMY else "webhook",
        trace_id=trace_id,
        position_known=event.native,
        log_index=_log_index(event),
        provider_event_id=event.event_id,
    )


async def assign_address(
    conn: asyncpg.Connection, chain: str, address: str, account_id: UUID
) -> asyncpg.Record:
    """Map (chain, address) to an account; `Conflict` when the address is taken."""
    try:
        row = await conn.fetchrow(SQL["assign_address"], chain, address, account_id)
    except asyncpg.UniqueViolationError:
        raise Conflict(f"address {address} is already assigned on {chain}") from None
    assert row is not None
    return row


async def list_unmatched(
    conn: Connection, after_at: datetime | None, after_id: str | None, limit: int
) -> list[asyncpg.Record]:
    """Unreviewed unmatched provider events, oldest first, after the cursor
    `(after_at, after_id)` (both None: from the start), at most `limit` (event_id, reason,
    chain, address, asset, amount, tx_hash, trace_id, created_at, detail, position)."""
    rows: list[asyncpg.Record] = await conn.fetch(SQL["list_unmatched"], after_at, after_id, limit)
    return rows
