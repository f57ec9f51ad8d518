"""The operator's settlement of a transfer mismatch: `payflow payouts settle`, audited.

A payout whose mined receipt moved the hot wallet's tokens otherwise than exactly the
payout (`proof.py`, stall `transfer_mismatch`) is never settled by the job: the hold
stays. Once that receipt is final, an operator who has looked at where the tokens went
decides, once:

- `confirmed`: the payout is posted as paid, as a proven one is: its amount debited
  (`po:<id>`), its fee charged (`pofee:<id>`), the whole hold released;
- `failed`: the hold is released and the gas (native) or `PAYOUT_TOKEN_FEE` (token) is
  charged (`pofee:<id>`), as for a reverted payout; the amount stays the account's.

The amount is the payout's, never another: the payout row, its notification and its
ledger debit must agree. What a receipt that sent part elsewhere costs the account beyond
that is a separate, audited ledger adjustment, not a payout outcome.

The chain is asked first (outside any transaction): the receipt must still show a mismatch
and be final. Then ONE transaction under the payout's row lock: the compare-and-set from
signed|sent (two operators at once: one settles, the other is refused), the postings, the
notification and the `payout_actions` row (action `settle`, the receipt's Transfers in its
evidence) commit together.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any
from uuid import UUID

import structlog

from payflow.chain.payouts.actions import OPEN, ActionRefused, _check_words
from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.holds import SQL
from payflow.chain.payouts.records import PayoutAction, PayoutStatus
from payflow.chain.payouts.settle import Landed, finalize_within
from payflow.config import ChainSettings, DatabaseSettings, PayoutSettings, RedisSettings
from payflow.db.tx import transaction
from payflow.errors import BadInput, NotFound
from payflow.money import format_amount

log = structlog.get_logger("payflow.payouts")

OUTCOMES = (PayoutStatus.CONFIRMED.value, PayoutStatus.FAILED.value)


@dataclass(frozen=True, slots=True)
class SettleResult:
    """What `settle_mismatch` did (the CLI prints it as JSON; amounts are strings)."""

    payout_id: str
    action: str
    status: str
    tx_hash: str
    block_number: int
    amount_debited: str  # "0" when failed
    fee_charged: str
    audit_id: int


async def _final_mismatch(engine: PayoutEngine, payout: Any) -> tuple[Landed, int]:
    """The payout's landed receipt, proven on the chain now to be a mismatch and final,
    with the finalized height; `ActionRefused` otherwise (the message says why)."""
    async with engine.pool.acquire() as conn:
        txs = await conn.fetch(SQL["payout_txs"], payout["id"])
    landed = await engine.landed(payout, txs)
    if landed is None:
        raise ActionRefused(f"no transaction of payout {payout['id']} is mined: nothing to settle")
    if not landed.mismatch:
        raise ActionRefused(
            f"the receipt of {landed.tx_hash} is not a transfer mismatch: payout"
            f" {payout['id']} settles by itself at finality"
        )
    finalized = await engine.finalized_height()
    if not await engine.is_final(landed, finalized):
        raise ActionRefused(
            f"the receipt of {landed.tx_hash} (block {landed.block_number}) is not final yet"
            f" (finalized: {finalized}): a reorg could still change it; wait"
        )
    return landed, finalized


async def settle_mismatch(
    engine: PayoutEngine, payout_id: UUID, *, outcome: str, actor: str, reason: str
) -> SettleResult:
    """Settle an open `transfer_mismatch` payout whose receipt is final as `outcome`
    (`confirmed` | `failed`; module docstring), exactly once, with an audit row.
    `BadInput` for a bad outcome/actor/reason, `NotFound` for an unknown payout,
    `ActionRefused` when the payout is not open, not on this chain, its receipt not a
    mismatch, not final, or another action settled/changed it meanwhile."""
    if outcome not in OUTCOMES:
        raise BadInput(f"--as: confirmed or failed, not {outcome!r}")
    _check_words(actor, reason)
    async with engine.pool.acquire() as conn:
        payout = await conn.fetchrow(SQL["get_payout"], payout_id)
    if payout is None:
        raise NotFound(f"payout {payout_id} does not exist")
    if payout["status"] not in OPEN:
        raise ActionRefused(
            f"payout {payout_id} is {payout['status']}: only a signed or sent payout"
        )
    if payout["chain"] != engine.chain:
        raise ActionRefused(f"payout {payout_id} is on {payout['chain']}, not {engine.chain}")
    landed, finalized = await _final_mismatch(engine, payout)
    target = PayoutStatus(outcome)
    failure = (
        None
        if target is PayoutStatus.CONFIRMED
        else f"transfer mismatch settled failed by {actor}: {reason}"[:1000]
    )
    evidence = {
        "as": outcome,
        "tx_hash": landed.tx_hash,
        "receipt_status": landed.status,
        "block_number": landed.block_number,
        "block_hash": landed.block_hash,
        "finalized_height": finalized,
        "fee_wei": str(landed.fee_wei),
        "transfers": list(landed.transfers),
    }
    async with engine.pool.acquire() as conn, transaction(conn, engine.database):
        locked = await conn.fetchrow(SQL["lock_payout"], payout_id)
        if locked is None or locked["status"] not in OPEN:
            status = None if locked is None else locked["status"]
            raise ActionRefused(f"payout {payout_id} is {status} now: settled meanwhile")
        if locked["nonce"] != payout["nonce"]:
            raise ActionRefused(f"payout {payout_id} changed meanwhile; run the command again")
        row = await finalize_within(conn, locked, landed, target, failure)
        assert row is not None  # locked and open above
        audit = await conn.fetchrow(
            SQL["insert_payout_action"],
            row["id"],
            PayoutAction.SETTLE.value,
            actor,
            reason,
            int(row["nonce"]),
            None,
            json.dumps(evidence),
        )
        assert audit is not None
    log.warning(
        "payflow.payouts.mismatch_settled",
        payout_id=str(row["id"]),
        by=actor,
        outcome=outcome,
        tx_hash=landed.tx_hash,
    )
    return SettleResult(
        payout_id=str(row["id"]),
        action=PayoutAction.SETTLE.value,
        status=row["status"],
        tx_hash=landed.tx_hash,
        block_number=landed.block_number,
        amount_debited=format_amount(row["amount"]) if target is PayoutStatus.CONFIRMED else "0",
        fee_charged=format_amount(row["fee_paid"]),
        audit_id=int(audit["id"]),
    )


async def settle_cli(
    settings: PayoutSettings,
    payout_id: UUID,
    *,
    outcome: str,
    actor: str,
    reason: str,
    database: DatabaseSettings,
    chains: ChainSettings,
    redis_settings: RedisSettings,
) -> dict[str, Any]:
    """The CLI's run of `payflow payouts settle`: a tool pool, `PAYOUT_CHAIN`'s RPC and
    finality oracle; the `SettleResult` as a dict. `BadInput` when no hot wallet or no RPC
    is configured."""
    from payflow.chain.payouts.job import payout_oracle
    from payflow.chain.payouts.signer import wallets_from_settings
    from payflow.db.pool import tool_pool

    wallets = wallets_from_settings(settings)
    oracle_of = payout_oracle(settings, None, chains=chains, redis_settings=redis_settings)
    async with oracle_of as oracle:
        if not wallets or oracle is None:
            raise BadInput(
                f"no hot wallet or no RPC is configured for PAYOUT_CHAIN {settings.payout_chain}"
            )
        async with tool_pool(database) as pool:
            engine = PayoutEngine(
                pool,
                settings,
                oracle.clients[settings.payout_chain],
                wallets,
                finality=oracle,
                database=database,
                chains=chains,
            )
            result = await settle_mismatch(
                engine, payout_id, outcome=outcome, actor=actor, reason=reason
            )
    return asdict(result)
