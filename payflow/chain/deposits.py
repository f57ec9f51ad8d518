"""Recording reports of on-chain transfers to our deposit addresses.

A report is a hint: a generic webhook, an Alchemy activity or the scanner says "this
transfer happened". `observe()` records it in `chain_deposit_reports` (once per source
and distinct claim) and nothing more; the deposit lifecycle (`payflow.chain.lifecycle`)
verifies it against the node, and only a transfer the node shows becomes a
`chain_deposits` row (content from the node, never from the report). So a refuted
report (no such transaction, another amount, recipient or contract) is kept for review
and never taints the real transfer with the same identity.

The scanner read the block from the node itself: with `seen_in_block` its report is
confirmed at once and the deposit recorded verified at that block.

The caller owns the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from uuid import UUID

from payflow.chain.deposit_events import record_deposit_event
from payflow.chain.transfers import NATIVE_POSITION, Transfer, transfer_id
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.ledger.limits import LimitExceeded, LimitKind, check_limit
from payflow.money import from_base_units
from payflow.webhooks import EventKind

SQL = load_queries("payflow.chain")
SOURCES = frozenset({"webhook", "alchemy", "scanner"})
DEFAULT_ASSIGNMENT_SLACK_S = 60.0  # CHAIN_ASSIGNMENT_SLACK_S's default
BEFORE_ASSIGNMENT = "before_assignment"


class ObserveOutcome(StrEnum):
    NEW = "new"  # a new report, pending verification (or, from the scanner, verified)
    DUPLICATE = "duplicate"  # this source already reported exactly this
    AMBIGUOUS = "ambiguous"  # the provider event id already names another claim
    IGNORED = "ignored"  # not a deposit payflow takes (reason says why); nothing stored


@dataclass(frozen=True, slots=True)
class ObserveResult:
    """What `observe` did. `transfer_id` is the transfer's identity when it is known
    (always for native value and the scanner; for a webhook's token transfer once the
    node resolved its position); `report_id` the stored report's id (None if ignored);
    `reason` why an event was ignored (unknown_address, unknown_token, asset_mismatch,
    zero_value, over_limit, before_assignment)."""

    outcome: ObserveOutcome
    transfer_id: str | None = None
    report_id: int | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Destination:
    """The account behind a deposit address, the asset/decimals the transfer moves and
    when the address was assigned to the account."""

    account_id: UUID
    asset: str
    decimals: int
    assigned_at: datetime | None = None

    def before_assignment(self, block_time: int | None, slack_s: float) -> bool:
        """THE assignment rule, applied alike by the scanner, webhook verification and
        recon: a transfer is creditable only if its block's timestamp (Unix seconds) is
        at or after the address's assignment minus `slack_s` (block timestamps are slot
        starts and clocks differ). Value that reached the address earlier was not sent
        to this account (an imported address's history, a guessed derived address) and
        is "not creditable: before assignment" everywhere. False when either time is
        unknown."""
        if block_time is None or self.assigned_at is None:
            return False
        return block_time < self.assigned_at.timestamp() - slack_s


def claim_text(to_address: str, contract: str | None, units: int, where: str) -> str:
    """The canonical text of what a report claims (unique per source and transaction)."""
    return f"{to_address}|{contract or 'native'}|{units}|{where}"


async def destination(
    conn: Connection, chain: str, to_address: str, contract: str | None
) -> Destination | str:
    """The account and registered asset of a transfer, or the reason it is not ours:
    `unknown_address`, `unknown_chain`, `unknown_token` or `asset_mismatch`."""
    row = await conn.fetchrow(SQL["address_account"], chain, to_address)
    if row is None:
        return "unknown_address"
    if contract is None:
        asset = await conn.fetchrow(SQL["native_asset"], chain)
        if asset is None:
            return "unknown_chain"
    else:
        asset = await conn.fetchrow(SQL["registered_token"], chain, contract)
        if asset is None:
            return "unknown_token"
    if asset["asset"] != row["asset"]:
        return "asset_mismatch"
    return Destination(row["account_id"], row["asset"], int(asset["decimals"]), row["assigned_at"])


async def observe(
    conn: Connection,
    transfer: Transfer,
    *,
    source: str,
    trace_id: str,
    seen_in_block: tuple[int, str] | None = None,
    position_known: bool = True,
    log_index: int | None = None,
    provider_event_id: str | None = None,
    assignment_slack_s: float = DEFAULT_ASSIGNMENT_SLACK_S,
) -> ObserveResult:
    """Record one report of `transfer` (`source`: webhook, alchemy or scanner).

    Idempotent: the same claim from the same source is a DUPLICATE; another source adds
    its own report, which verification links to the same deposit (one credit).
    `position_known=False` (a webhook's token transfer: providers give at most a
    block-level `log_index`, kept as a hint) lets verification find the position
    inside the transaction by content. `provider_event_id` (the namespaced id of a
    webhook event) may name one claim only: reused for another, it is AMBIGUOUS.
    `seen_in_block=(number, hash)` (the scanner, which read the
    block itself) confirms the report and records the deposit verified at that block.
    A transfer whose `block_time` is before the address's assignment
    (`Destination.before_assignment`, `assignment_slack_s`) is IGNORED as
    `before_assignment`. Raises `ValueError` for an unknown source; never raises on the
    transfer's content.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}")
    to_address = transfer.to_address.lower()
    contract = transfer.contract.lower() if transfer.contract else None
    if transfer.units <= 0:
        return ObserveResult(ObserveOutcome.IGNORED, reason="zero_value")
    found = await destination(conn, transfer.chain, to_address, contract)
    if isinstance(found, str):
        return ObserveResult(ObserveOutcome.IGNORED, reason=found)
    if found.before_assignment(transfer.block_time, assignment_slack_s):
        return ObserveResult(ObserveOutcome.IGNORED, reason=BEFORE_ASSIGNMENT)
    amount: Decimal = from_base_units(transfer.units, found.decimals)
    try:
        await check_limit(conn, found.asset, LimitKind.DEPOSIT, amount)
    except LimitExceeded:
        return ObserveResult(ObserveOutcome.IGNORED, reason="over_limit")
    native = contract is None
    position: int | None = NATIVE_POSITION if native else None
    if not native and (position_known or seen_in_block is not None):
        position = transfer.position
    log_index = None if native or position is not None else log_index
    where = f"p{position}" if position is not None else f"l{log_index}"
    tid = transfer_id(transfer.chain, transfer.tx_hash, position) if position is not None else None
    claim = claim_text(to_address, contract, transfer.units, where)
    report_id = await conn.fetchval(
        SQL["insert_report"],
        source,
        transfer.chain,
        transfer.tx_hash.lower(),
        position,
        log_index,
        claim,
        to_address,
        contract,
        Decimal(transfer.units),
        found.account_id,
        amount,
        trace_id,
        provider_event_id,
    )
    if report_id is None:
        same = await conn.fetchval(
            SQL["same_claim"], source, transfer.chain, transfer.tx_hash.lower(), claim
        )
        return ObserveResult(ObserveOutcome.DUPLICATE if same else ObserveOutcome.AMBIGUOUS, tid)
    if seen_in_block is not None and tid is not None:
        number, block_hash = seen_in_block
        await record_verified(
            conn,
            transfer_id=tid,
            transfer=transfer,
            destination=found,
            block=(number, block_hash.lower()),
            source=source,
            trace_id=trace_id,
        )
        await conn.execute(SQL["confirm_report"], report_id, tid)
    return ObserveResult(ObserveOutcome.NEW, tid, report_id)


async def record_verified(
    conn: Connection,
    *,
    transfer_id: str,
    transfer: Transfer,
    destination: Destination,
    block: tuple[int, str],
    source: str,
    trace_id: str | None,
) -> str:
    """Insert or refresh the deposit the node showed at `block`; its status after.

    A new deposit is `verified`; an existing one gains `source`; an `orphaned` one
    seen again (re-included) is `verified` at the new block; a `verified` one moves to
    the new block. A credited or reversed deposit keeps its status and block. A verified
    deposit records its merchant's `deposit.pending` (once per round).
    """
    status: str = await conn.fetchval(
        SQL["upsert_deposit"],
        transfer_id,
        transfer.chain,
        transfer.tx_hash.lower(),
        transfer.position,
        transfer.to_address.lower(),
        transfer.contract.lower() if transfer.contract else None,
        Decimal(transfer.units),
        destination.account_id,
        destination.asset,
        from_base_units(transfer.units, destination.decimals),
        block[0],
        block[1],
        source,
        trace_id,
    )
    if status == "verified":
        await record_deposit_event(conn, EventKind.DEPOSIT_PENDING, transfer_id)
    return status


async def recheck_transaction(conn: Connection, chain: str, tx_hash: str) -> int:
    """Bring the deposits and pending reports of a transaction forward for checking
    (an Alchemy `removed: true` notice); how many rows."""
    count: int = await conn.fetchval(SQL["recheck_tx"], chain, tx_hash.lower())
    return count


async def pending_incoming(conn: Connection, account_id: UUID) -> Decimal:
    """Seen but not credited, for `account_id` (never spendable): verified deposits plus
    pending reports not yet linked to a deposit (one per claimed transfer)."""
    value: Decimal = await conn.fetchval(SQL["pending_incoming"], account_id)
    return value
