"""Operator actions on a payout that does not progress: `void` and `resign`, audited.

Both first ask the chain (outside any transaction) what happened at the payout's nonce,
then act in ONE transaction under the payout's row lock, with a `payout_actions` row
(who, why, the chain's evidence). Both are refused while any transaction of the payout
has a receipt (it settles by itself) or while the node still holds one of them at an
unused nonce (it may still be mined):

- the nonce is consumed by another transaction (`nonce_taken`): ours can never be mined;
  `void` releases the hold (nothing charged: no gas of ours was spent), `resign` signs the
  payout again at a fresh nonce;
- the nonce was never used and the node knows none of our transactions: `resign` signs
  again at the SAME nonce (a later nonce would leave a gap that blocks every later
  payout); `void` only when no later nonce was allocated (the nonce goes back) AND no
  transaction of the payout was ever accepted by a node (`payout_txs.broadcast_at`): an
  accepted one is public, other nodes may hold it after ours dropped it, and it could be
  mined after the void released the hold (the money gone, the account refunded).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import structlog

from payflow.chain.payouts import feehold
from payflow.chain.payouts.broadcast import Broadcast
from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.feehold import RaisedHold, parse_raise, raised_fees
from payflow.chain.payouts.holds import SQL
from payflow.chain.payouts.plan import bumped_fees, capped_fees, fee_ceiling, payout_call
from payflow.chain.payouts.records import PayoutAction
from payflow.chain.payouts.settle import enqueue_notification
from payflow.chain.payouts.signer import SignedTx, TxFees
from payflow.chain.payouts.signing import mined_count
from payflow.config import ChainSettings, DatabaseSettings, PayoutSettings, RedisSettings
from payflow.db.tx import transaction
from payflow.errors import BadInput, NotFound
from payflow.money import format_amount

log = structlog.get_logger("payflow.payouts")

OPEN = ("signed", "sent")


class ActionRefused(BadInput):
    """The chain or the payout's state forbids the action (the message says why)."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the chain showed for a payout's nonce before an action."""

    nonce: int
    wallet: str
    mined_count: int  # the wallet's mined transaction count
    hashes: list[str]  # all of the payout's transactions
    with_receipt: list[str]  # those mined
    known_to_node: list[str]  # those the node holds (mempool)

    @property
    def consumed(self) -> bool:
        """The nonce is used on chain (by another transaction when none of ours is mined)."""
        return self.mined_count > self.nonce

    def as_json(self, **extra: Any) -> str:
        return json.dumps(
            extra
            | {
                "nonce": self.nonce,
                "wallet": self.wallet,
                "mined_count": self.mined_count,
                "hashes": self.hashes,
                "with_receipt": self.with_receipt,
                "known_to_node": self.known_to_node,
            }
        )


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What an action did (the CLI prints it as JSON)."""

    payout_id: str
    action: str
    status: str
    old_nonce: int
    new_nonce: int | None
    tx_hash: str | None
    audit_id: int
    broadcast: str | None = None
    fee_hold: str | None = None  # the payout's fee hold after an operator's raise


async def _evidence(engine: PayoutEngine, payout: Any, txs: list[Any]) -> Evidence:
    hashes = [str(t["tx_hash"]) for t in txs]
    receipts = await engine.rpc.batch([("eth_getTransactionReceipt", [h]) for h in hashes])
    known = await engine.rpc.batch([("eth_getTransactionByHash", [h]) for h in hashes])
    return Evidence(
        nonce=int(payout["nonce"]),
        wallet=str(payout["hot_wallet"]),
        mined_count=await mined_count(engine, payout["hot_wallet"]),
        hashes=hashes,
        with_receipt=[h for h, r in zip(hashes, receipts, strict=True) if r],
        known_to_node=[h for h, k in zip(hashes, known, strict=True) if k],
    )


async def _load(
    engine: PayoutEngine, payout_id: UUID, *, replacing: bool = False
) -> tuple[Any, list[Any], Evidence]:
    """The payout, its transactions and the chain's evidence; `ActionRefused` when an
    action may not run. `replacing`: the action replaces a transaction the node may hold
    at the same nonce (a raised fee hold), so a pending one does not refuse it."""
    async with engine.pool.acquire() as conn:
        payout = await conn.fetchrow(SQL["get_payout"], payout_id)
        if payout is None:
            raise NotFound(f"payout {payout_id} does not exist")
        txs = await conn.fetch(SQL["payout_txs"], payout_id)
    if payout["status"] not in OPEN:
        raise ActionRefused(
            f"payout {payout_id} is {payout['status']}: only a signed or sent payout"
        )
    if payout["chain"] != engine.chain:
        raise ActionRefused(f"payout {payout_id} is on {payout['chain']}, not {engine.chain}")
    evidence = await _evidence(engine, payout, txs)
    if evidence.with_receipt:
        raise ActionRefused(
            f"transaction {evidence.with_receipt[0]} of payout {payout_id} is mined: it"
            " settles by itself at finality"
        )
    if not evidence.consumed and evidence.known_to_node and not replacing:
        raise ActionRefused(
            f"the node holds transaction {evidence.known_to_node[0]} of payout {payout_id} at"
            f" unused nonce {evidence.nonce}: it may still be mined; wait or let it be bumped"
        )
    return payout, txs, evidence


async def _locked(conn: Any, payout: Any, txs: list[Any]) -> Any:
    """The payout locked and unchanged since the evidence was read, or `ActionRefused`."""
    row = await conn.fetchrow(SQL["lock_payout"], payout["id"])
    now_txs = await conn.fetch(SQL["payout_txs"], payout["id"])
    if (
        row is None
        or row["status"] not in OPEN
        or row["nonce"] != payout["nonce"]
        or len(now_txs) != len(txs)
    ):
        raise ActionRefused(f"payout {payout['id']} changed meanwhile; run the command again")
    return row


def _check_words(actor: str, reason: str) -> None:
    if not actor.strip() or len(actor) > 200:
        raise BadInput("--by: the operator's name is required (at most 200 characters)")
    if not reason.strip() or len(reason) > 2000:
        raise BadInput("--reason: why is required (at most 2000 characters)")


async def void_payout(
    engine: PayoutEngine, payout_id: UUID, *, actor: str, reason: str
) -> ActionResult:
    """Void an open payout none of whose transactions was mined: failed, hold released,
    nothing charged, `failed` notification, audit row. Refused (`ActionRefused`) unless
    the nonce is consumed by another transaction, or unused and no later one allocated."""
    _check_words(actor, reason)
    payout, txs, evidence = await _load(engine, payout_id)
    async with engine.pool.acquire() as conn, transaction(conn, engine.database):
        await _locked(conn, payout, txs)
        if not evidence.consumed:
            now_txs = await conn.fetch(SQL["payout_txs"], payout["id"])  # under the lock
            public = [t for t in now_txs if t["broadcast_at"] is not None]
            if public:
                raise ActionRefused(
                    f"transaction {public[0]['tx_hash']} of payout {payout['id']} was accepted"
                    f" by the node at {public[0]['broadcast_at'].isoformat()}: it is public and"
                    f" can still be mined at unused nonce {evidence.nonce} (our node dropping"
                    " it proves nothing of the others); re-sign this payout instead (same"
                    " nonce: whichever of its transactions is mined settles it, once)"
                )
            back = await conn.fetchval(
                SQL["give_back_nonce"], engine.chain, evidence.wallet, evidence.nonce
            )
            if back is None:
                raise ActionRefused(
                    f"nonce {evidence.nonce} was never used and later payouts hold later"
                    " nonces: voiding it would block them; re-sign this payout instead"
                )
        failure = f"voided by {actor}: {reason}"[:1000]
        row = await conn.fetchrow(SQL["void_payout"], payout["id"], failure)
        assert row is not None  # locked and open above
        await conn.execute(SQL["release_hold"], row["id"])
        audit = await conn.fetchrow(
            SQL["insert_payout_action"],
            row["id"],
            PayoutAction.VOID.value,
            actor,
            reason,
            evidence.nonce,
            None,
            evidence.as_json(),
        )
        assert audit is not None
        await enqueue_notification(conn, row)
    log.warning("payflow.payouts.voided", payout_id=str(row["id"]), by=actor, nonce=evidence.nonce)
    return ActionResult(
        payout_id=str(row["id"]),
        action=PayoutAction.VOID.value,
        status=row["status"],
        old_nonce=evidence.nonce,
        new_nonce=None,
        tx_hash=None,
        audit_id=int(audit["id"]),
    )


async def resign_payout(
    engine: PayoutEngine,
    payout_id: UUID,
    *,
    actor: str,
    reason: str,
    raise_fee_hold: str | None = None,
) -> ActionResult:
    """Sign an open payout again, none of whose transactions was mined: at a fresh nonce
    when its nonce was consumed by another transaction, at the same nonce when it was
    never used; fees of now, capped at the payout's hold. The new transaction is stored
    with the audit row in one transaction, then broadcast (the engine tracks it on).

    `raise_fee_hold` (a decimal string, native payouts only: `feehold.py`): first hold that
    much more of the account's money as the payout's fee, then sign at the same nonce (or
    a fresh one when it was taken) offering what the raised hold allows; allowed while the
    node holds one of its transactions (the new one replaces it, 10% above). The raise, the
    new transaction and the audit row (`fee_hold_raised` in its evidence) commit together.
    `FeeHoldRefused` when the account cannot cover it, is frozen, or the raise is too small.
    """
    _check_words(actor, reason)
    payout, txs, evidence = await _load(engine, payout_id, replacing=raise_fee_hold is not None)
    added = None if raise_fee_hold is None else parse_raise(raise_fee_hold, payout)
    wallet = engine.wallets.get(evidence.wallet)
    if wallet is None and not evidence.consumed:
        raise ActionRefused(f"hot wallet {evidence.wallet} is not configured here")
    if wallet is None:
        wallet = next(iter(engine.wallets.values()))
    await engine.ensure_wallets()
    base = await engine.fees()
    base_fee = await engine.base_fee()
    gas_limit = engine.gas_limit(payout)
    ceiling = fee_ceiling(engine.settings, payout, gas_limit)
    now_fees = TxFees(gas_limit, base.max_fee_per_gas, base.max_priority_fee_per_gas)
    fees = capped_fees(now_fees, ceiling)
    if not evidence.consumed:  # the same nonce: replace any public copy (+10%) if the cap allows
        fees = bumped_fees(engine.settings, txs[-1], now_fees, ceiling) or fees
    floor = await mined_count(engine, wallet.address)
    chain_id = await engine.chain_id()
    raised: RaisedHold | None = None
    async with engine.pool.acquire() as conn, transaction(conn, engine.database):
        row = await _locked(conn, payout, txs)
        if added is not None:
            raised = await feehold.raise_fee_hold(conn, row, added)
            fees = raised_fees(gas_limit, raised, int(row["decimals"]), base_fee, txs[-1])
        if evidence.consumed:
            nonce = int(
                await conn.fetchval(SQL["allocate_nonce"], engine.chain, wallet.address, floor)
            )
        else:
            nonce = evidence.nonce
        to, value, data = payout_call(row)
        signed: SignedTx = wallet.sign(
            chain_id=chain_id, nonce=nonce, to=to, value=value, data=data, fees=fees
        )
        if signed.tx_hash not in evidence.hashes:  # the same bytes again: already stored
            attempt = await conn.fetchval(SQL["next_attempt"], row["id"])
            await engine.store(conn, row["id"], attempt, wallet.address, nonce, signed, fees)
        await conn.fetchrow(SQL["resign_payout"], row["id"], wallet.address, nonce)
        extra = {} if raised is None else {"fee_hold_raised": raised.as_evidence()}
        audit = await conn.fetchrow(
            SQL["insert_payout_action"],
            row["id"],
            PayoutAction.RESIGN.value,
            actor,
            reason,
            evidence.nonce,
            nonce,
            evidence.as_json(**extra),
        )
        assert audit is not None
    log.warning(
        "payflow.payouts.resigned",
        payout_id=str(row["id"]),
        by=actor,
        old_nonce=evidence.nonce,
        new_nonce=nonce,
        tx_hash=signed.tx_hash,
        fee_hold=None if raised is None else format_amount(raised.after),
    )
    answer = await engine.send(row["id"], signed)
    return ActionResult(
        payout_id=str(row["id"]),
        action=PayoutAction.RESIGN.value,
        status="sent" if answer.outcome is Broadcast.ACCEPTED else "signed",
        old_nonce=evidence.nonce,
        new_nonce=nonce,
        tx_hash=signed.tx_hash,
        audit_id=int(audit["id"]),
        broadcast=answer.outcome.value,
        fee_hold=None if raised is None else format_amount(raised.after),
    )


async def action_cli(
    settings: PayoutSettings,
    action: PayoutAction,
    payout_id: UUID,
    *,
    actor: str,
    reason: str,
    raise_fee_hold: str | None = None,
    database: DatabaseSettings,
    chains: ChainSettings,
    redis_settings: RedisSettings,
) -> dict[str, Any]:
    """The CLI's run of `payflow payouts void|resign`: a tool pool, the configured hot
    wallet(s) and `PAYOUT_CHAIN`'s RPC; the `ActionResult` as a dict. `BadInput` when
    no hot wallet or no RPC is configured."""
    from dataclasses import asdict

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
            if action is PayoutAction.VOID:
                result = await void_payout(engine, payout_id, actor=actor, reason=reason)
            else:
                result = await resign_payout(
                    engine, payout_id, actor=actor, reason=reason, raise_fee_hold=raise_fee_hold
                )
    return asdict(result)


async def stalled_cli(
    settings: PayoutSettings, *, database: DatabaseSettings
) -> list[dict[str, Any]]:
    """`payflow payouts stalled`: every open payout that does not progress (all chains)."""
    from payflow.db.pool import tool_pool

    async with tool_pool(database) as pool, pool.acquire() as conn:
        rows = await conn.fetch(SQL["stalled_payouts"], None, settings.payout_stuck_after_s)
    return [
        {
            "payout_id": str(r["id"]),
            "chain": r["chain"],
            "status": r["status"],
            "stall": r["stall"] or "unmined",
            "detail": r["stall_detail"],
            "wallet": r["hot_wallet"],
            "nonce": r["nonce"],
            "for_s": round(float(r["for_s"])),
        }
        for r in rows
    ]
