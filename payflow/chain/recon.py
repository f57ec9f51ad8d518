"""Reconciliation with the chain: `payflow recon --chain [--from-block N]` and the daily
job `recon_chain`.

Re-reads the FINAL blocks of a range (default: the last `RECON_CHAIN_WINDOW_BLOCKS`
up to the chain's finalized height) straight from the node and compares:
- every final transfer to one of our deposit addresses — ERC-20 `Transfer` logs of the
  registered contracts (`eth_getLogs`, topic2 = our addresses in batches of
  `RECON_CHAIN_ADDRESS_BATCH`, spans of `RECON_CHAIN_BLOCK_SPAN` blocks) and native value
  in the block bodies — must be credited (`uncredited`), unless payflow's own rules would
  never credit it (`not_creditable`: the asset is not the account's, an unregistered
  token, a zero value, over the deposit limit), which the scanner ignores too: those are
  listed for an operator (a warning alert), they do not make the report dirty (1 wei
  of ETH to a USDC address must not make every run DIRTY, with a critical alert nothing
  could clear);
- every credited deposit in the range must be such a transfer at the block hash that is
  final now, and every confirmed `chain:<chain>:…` deposit event must belong to a
  credited deposit (`credit_without_transfer`).
Read-only. Any mismatch makes the report dirty (the command exits 1, the job alerts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import asyncpg

from payflow.chain.deposits import BEFORE_ASSIGNMENT, SQL, destination
from payflow.chain.finality import FinalityOracle
from payflow.chain.identity import check_node
from payflow.chain.watch.blocks import read_range
from payflow.chain.watch.logs import SpanMemory
from payflow.config import ChainSettings
from payflow.db import Connection
from payflow.ledger.limits import LimitExceeded, LimitKind, check_limit
from payflow.money import from_base_units


@dataclass(slots=True)
class ChainReconReport:
    """The range checked and what did not match (transfer ids / event ids)."""

    chain: str
    from_block: int
    to_block: int
    transfers_seen: int = 0
    credits_checked: int = 0
    uncredited: list[str] = field(default_factory=list)
    credit_without_transfer: list[str] = field(default_factory=list)
    not_creditable: list[str] = field(default_factory=list)  # "<transfer id> (<reason>)"

    @property
    def clean(self) -> bool:
        return not (self.uncredited or self.credit_without_transfer)

    def summary(self) -> str:
        return (
            f"chain={self.chain} blocks={self.from_block}..{self.to_block} "
            f"transfers={self.transfers_seen} credits={self.credits_checked} "
            f"uncredited={len(self.uncredited)} "
            f"credit_without_transfer={len(self.credit_without_transfer)} "
            f"not_creditable={len(self.not_creditable)} "
            f"result={'clean' if self.clean else 'DIRTY'}"
        )


@dataclass(frozen=True, slots=True)
class FinalTransfer:
    """A final transfer to one of our addresses, as the node shows it."""

    block_hash: str
    to_address: str
    contract: str | None  # None: native value
    units: int
    block_time: int | None = None


async def _final_transfers(
    oracle: FinalityOracle,
    settings: ChainSettings,
    chain: str,
    span: tuple[int, int],
    tokens: list[str],
    ours: list[str],
) -> dict[str, FinalTransfer]:
    """{transfer id: transfer} of the final range `span`, read exactly as the scanner
    reads (`blocks.read_range`: bodies for native value, registered-token logs with
    "nothing there" verified against each header's bloom, split on a provider's limit),
    in spans of `RECON_CHAIN_BLOCK_SPAN` blocks."""
    found: dict[str, FinalTransfer] = {}
    if not ours:
        return found
    memory = SpanMemory()

    async def call(fn: Any) -> Any:
        return await oracle.call(chain, fn)

    step = settings.recon_chain_block_span
    for start in range(span[0], span[1] + 1, step):
        end = min(start + step - 1, span[1])
        read = await read_range(
            call,
            chain,
            start,
            end,
            addresses=frozenset(ours),
            tokens=tokens,
            address_batch=settings.recon_chain_address_batch,
            memory=memory,
        )
        for t in read.transfers:
            assert t.block_hash is not None
            found[t.id] = FinalTransfer(
                t.block_hash, t.to_address, t.contract, t.units, t.block_time
            )
    return found


async def reconcile_chain(
    pool: asyncpg.Pool,
    settings: ChainSettings,
    oracle: FinalityOracle,
    chain: str,
    *,
    from_block: int | None = None,
) -> ChainReconReport:
    """Compare the final blocks `from_block`..finalized with payflow's credits.
    Raises `ChainUnavailable` while the node cannot be asked, `NodeMisconfigured` when
    it is another network or lacks the policy's tag, `RetryableError`s of the read."""
    await check_node(pool, oracle, chain)
    to_block = await oracle.finalized_height(chain)
    start = (
        from_block if from_block is not None else to_block - settings.recon_chain_window_blocks + 1
    )
    start = max(start, 0)
    report = ChainReconReport(chain, start, to_block)
    if to_block < start:
        return report
    async with pool.acquire() as conn:
        ours = [r["address"] for r in await conn.fetch(SQL["our_addresses"], chain)]
        tokens = [r["contract"] for r in await conn.fetch(SQL["chain_tokens"], chain)]
    evm = [a for a in ours if a.startswith("0x") and len(a) == 42]
    final = await _final_transfers(oracle, settings, chain, (start, to_block), tokens, evm)
    report.transfers_seen = len(final)
    async with pool.acquire() as conn:
        credited = {r["transfer_id"] for r in await conn.fetch(SQL["credited_ids"], list(final))}
        in_range = await conn.fetch(SQL["credited_in_range"], chain, start, to_block)
        orphan_events = await conn.fetch(SQL["deposit_events_without_credit"], f"chain:{chain}:")
        for tid in sorted(set(final) - credited):
            reason = await _never_credited(conn, settings, chain, final[tid])
            if reason is None:
                report.uncredited.append(tid)
            else:
                report.not_creditable.append(f"{tid} ({reason})")
    report.credits_checked = len(in_range)
    report.credit_without_transfer = sorted(
        [r["transfer_id"] for r in in_range if _hash_of(final, r["transfer_id"]) != r["block_hash"]]
        + [r["event_id"] for r in orphan_events]
    )
    return report


def _hash_of(final: dict[str, FinalTransfer], tid: str) -> str | None:
    found = final.get(tid)
    return None if found is None else found.block_hash


async def _never_credited(
    conn: Connection, settings: ChainSettings, chain: str, transfer: FinalTransfer
) -> str | None:
    """Why payflow's rules would never credit `transfer` (the scanner's and the
    lifecycle's: `deposits.destination`, a zero value, the assignment rule, the deposit
    limit), or None when it should have been credited."""
    if transfer.units <= 0:
        return "zero_value"
    found = await destination(conn, chain, transfer.to_address, transfer.contract)
    if isinstance(found, str):
        return found
    if found.before_assignment(transfer.block_time, settings.chain_assignment_slack_s):
        return BEFORE_ASSIGNMENT
    try:
        await check_limit(
            conn, found.asset, LimitKind.DEPOSIT, from_base_units(transfer.units, found.decimals)
        )
    except LimitExceeded:
        return "over_limit"
    return None
