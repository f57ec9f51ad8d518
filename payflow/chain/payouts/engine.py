"""The payout engine: sign held payouts exactly once, broadcast, track, bump, settle.

Nonce protocol (docs/payouts.md): in ONE transaction the held payout is locked, the
nonce is taken from `hot_wallets` (row lock), the transaction is signed and its raw
bytes and hash are stored (`payout_txs`), and the payout becomes `signed`. Only after
that commit is anything broadcast. Every later step resends those stored bytes; a fee
bump signs a new attempt with the SAME nonce, stored the same way before it is sent.
Whichever attempt's receipt the node shows is the one settled, once (`settle.py`).
"""

from __future__ import annotations

import time
from typing import Any

import asyncpg
import structlog

from payflow.chain.finality import FinalityOracle
from payflow.chain.identity import check_signing_chain
from payflow.chain.payouts.broadcast import Broadcast, broadcast
from payflow.chain.payouts.funds import WalletFunds, load_funds, need_of
from payflow.chain.payouts.holds import SQL
from payflow.chain.payouts.plan import TickReport, bumped_fees, payout_call
from payflow.chain.payouts.records import PayoutStatus
from payflow.chain.payouts.settle import Landed, enqueue_notification, settle
from payflow.chain.payouts.signer import HotWallet, SignedTx, TxFees
from payflow.chain.rpc import RpcClient, hex_int
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.errors import ChainUnavailable, PayflowError
from payflow.metrics import PAYOUTS
from payflow.ops.alerts import AlertSink, LogAlertSink, Severity

log = structlog.get_logger("payflow.payouts")


class PayoutEngine:
    """One chain, its RPC client and its hot wallet(s). Safe to run in several processes:
    every step is a compare-and-set or a row lock in PostgreSQL."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: Settings,
        rpc: RpcClient,
        wallets: list[HotWallet],
        *,
        finality: FinalityOracle | None = None,
        alerts: AlertSink | None = None,
    ) -> None:
        if not wallets:
            raise ValueError("a payout engine needs at least one hot wallet")
        self.pool = pool
        self.settings = settings
        self.rpc = rpc
        self.chain = settings.payout_chain
        self.wallets = {wallet.address: wallet for wallet in wallets}
        self.finality = finality
        self.alerts: AlertSink = alerts if alerts is not None else LogAlertSink()
        self._known_wallets: set[str] = set()
        self._next_wallet = 0

    async def chain_id(self) -> int:
        """`eth_chainId`, asked before EVERY signing (the endpoint behind the RPC URL may
        have changed since the last one) and checked against the chain's expected id
        (`NodeMisconfigured`: another network or no chain id, nothing signed)."""
        raw = await self.rpc.call("eth_chainId")
        return await check_signing_chain(self.pool, self.settings, self.chain, raw)

    async def ensure_wallets(self) -> None:
        """A `hot_wallets` row per wallet, starting at the chain's pending nonce."""
        for address in self.wallets:
            if address in self._known_wallets:
                continue
            count = hex_int(await self.rpc.call("eth_getTransactionCount", address, "pending"))
            async with self.pool.acquire() as conn, transaction(conn, self.settings):
                await conn.execute(SQL["ensure_hot_wallet"], self.chain, address, count)
            self._known_wallets.add(address)

    async def fees(self) -> TxFees:
        """First-attempt fees: priority `PAYOUT_PRIORITY_FEE_WEI`, max 2 x base + priority,
        never above `PAYOUT_MAX_FEE_PER_GAS_WEI` (the ceiling the hold was computed at).
        The gas limit is filled in per payout."""
        block = await self.rpc.get_block("latest")
        base = hex_int(block.get("baseFeePerGas") if block else None) or 0
        cap = self.settings.payout_max_fee_per_gas_wei
        max_fee = min(cap, 2 * base + self.settings.payout_priority_fee_wei)
        return TxFees(0, max_fee, min(self.settings.payout_priority_fee_wei, max_fee))

    def gas_limit(self, payout: Any) -> int:
        if payout["contract"] is None:
            return self.settings.payout_native_gas_limit
        return self.settings.payout_token_gas_limit

    async def tick(self) -> TickReport:
        """One pass: sign and send held payouts, then track every signed or sent one."""
        report = TickReport()
        await self.ensure_wallets()
        await self.sign_held(report)
        await self.track(report)
        return report

    # --- signing -------------------------------------------------------------------

    async def sign_held(self, report: TickReport) -> None:
        """Sign (exactly once) and send the held payouts the hot wallets can pay now."""
        async with self.pool.acquire() as conn:
            held = await conn.fetch(
                SQL["held_payouts"], self.chain, self.settings.payout_batch_size
            )
        if not held:
            await self.alerts.resolve("payouts.hot_wallet_low")
            return
        base_fees = await self.fees()
        contracts = {p["contract"] for p in held if p["contract"] is not None}
        funds = {
            address: await load_funds(self.pool, self.rpc, self.chain, address, contracts)
            for address in self.wallets
        }
        order = list(self.wallets)
        waiting: list[Any] = []
        frozen = [p for p in held if p["account_status"] != "active"]
        async with self.pool.acquire() as conn, transaction(conn, self.settings):
            for payout in frozen:  # not signed while frozen: the freeze may be for fraud
                await conn.execute(SQL["set_wait_reason"], payout["id"], "account frozen")
        for payout in (p for p in held if p["account_status"] == "active"):
            fees = TxFees(
                self.gas_limit(payout),
                base_fees.max_fee_per_gas,
                base_fees.max_priority_fee_per_gas,
            )
            need = need_of(payout, fees)
            wallet = self._pick(order, funds, need)
            if wallet is None:
                waiting.append(payout)
                continue
            signed = await self.sign_one(payout, wallet, fees)
            if signed is None:
                continue
            funds[wallet.address].spend(need)
            report.signed += 1
            PAYOUTS.labels("signed").inc()
            if await self.send(payout["id"], signed) is Broadcast.ACCEPTED:
                report.sent += 1
        report.waiting = len(waiting)
        PAYOUTS.labels("waiting").inc(len(waiting))
        await self._waiting(waiting, funds)

    def _pick(self, order: list[str], funds: dict[str, WalletFunds], need: Any) -> HotWallet | None:
        for offset in range(len(order)):
            address = order[(self._next_wallet + offset) % len(order)]
            if funds[address].covers(need):
                self._next_wallet = (self._next_wallet + offset + 1) % len(order)
                return self.wallets[address]
        return None

    async def _waiting(self, waiting: list[Any], funds: dict[str, WalletFunds]) -> None:
        reason = "hot wallet balance too low"
        async with self.pool.acquire() as conn, transaction(conn, self.settings):
            for payout in waiting:
                await conn.execute(SQL["set_wait_reason"], payout["id"], reason)
        if not waiting:
            await self.alerts.resolve("payouts.hot_wallet_low")
            return
        await self.alerts.fire(
            "payouts.hot_wallet_low",
            Severity.WARNING,
            f"{len(waiting)} payout(s) wait: the hot wallet cannot pay them; fund it",
            details={
                "chain": self.chain,
                "waiting": len(waiting),
                "wallets": {a: f.describe() for a, f in funds.items()},
            },
        )

    async def sign_one(self, payout: Any, wallet: HotWallet, fees: TxFees) -> SignedTx | None:
        """Allocate the nonce, sign, store the raw tx, mark signed: one transaction.
        None when the payout is no longer held (another signer took it)."""
        chain_id = await self.chain_id()
        async with self.pool.acquire() as conn, transaction(conn, self.settings):
            row = await conn.fetchrow(SQL["lock_held_payout"], payout["id"])
            if row is None:
                return None
            nonce = await conn.fetchval(SQL["allocate_nonce"], self.chain, wallet.address)
            to, value, data = payout_call(row)
            signed = wallet.sign(
                chain_id=chain_id, nonce=nonce, to=to, value=value, data=data, fees=fees
            )
            await self._store(conn, row["id"], 1, wallet.address, nonce, signed, fees)
            await conn.execute(SQL["mark_signed"], row["id"], wallet.address, nonce)
        log.info(
            "payflow.payouts.signed",
            payout_id=str(row["id"]),
            tx_hash=signed.tx_hash,
            nonce=nonce,
            wallet=wallet.address,
        )
        return signed

    async def _store(
        self,
        conn: Any,
        payout_id: Any,
        attempt: int,
        wallet: str,
        nonce: int,
        signed: SignedTx,
        fees: TxFees,
    ) -> None:
        await conn.execute(
            SQL["insert_payout_tx"],
            payout_id,
            attempt,
            self.chain,
            wallet,
            nonce,
            signed.tx_hash,
            signed.raw,
            fees.gas_limit,
            fees.max_fee_per_gas,
            fees.max_priority_fee_per_gas,
        )

    async def send(self, payout_id: Any, signed: SignedTx) -> Broadcast:
        """Broadcast stored bytes; on acceptance record it (signed -> sent + notification)."""
        outcome = await broadcast(self.rpc, signed.raw, signed.tx_hash)
        if outcome is Broadcast.ACCEPTED:
            await self.mark_sent(payout_id, signed.tx_hash)
        return outcome

    async def mark_sent(self, payout_id: Any, tx_hash: str | None) -> None:
        async with self.pool.acquire() as conn, transaction(conn, self.settings):
            if tx_hash is not None:
                await conn.execute(SQL["mark_broadcast"], tx_hash)
            row = await conn.fetchrow(SQL["mark_sent"], payout_id)
            if row is not None:
                await enqueue_notification(conn, row)
        if row is not None:  # committed
            PAYOUTS.labels("sent").inc()

    # --- tracking ------------------------------------------------------------------

    async def finalized_height(self) -> int:
        """The highest final block under the chain's policy (the finality oracle's answer;
        without an oracle, the node's `finalized` tag); -1 when nothing is final."""
        if self.finality is not None:
            return await self.finality.finalized_height(self.chain)
        block = await self.rpc.get_block("finalized")
        number = hex_int(block.get("number") if block else None)
        return number if number is not None else -1

    async def is_final(self, landed: Landed, finalized: int) -> bool:
        """The landed block is final AND still the canonical block at its height."""
        if landed.block_number > finalized:
            return False
        if self.finality is None:
            return True  # the receipt was just read from the node's canonical chain
        final = await self.finality.is_final(self.chain, landed.block_number, landed.block_hash)
        return final is True

    async def track(self, report: TickReport) -> None:
        """Receipts of every signed or sent payout: settle at finality, re-send or bump."""
        async with self.pool.acquire() as conn:
            open_rows = await conn.fetch(
                SQL["open_payouts"], self.chain, self.settings.payout_batch_size
            )
        if not open_rows:
            await self.alerts.resolve("payouts.stuck")
            return
        finalized = await self.finalized_height()
        stuck: list[str] = []
        for payout in open_rows:
            try:
                if await self._track_one(payout, finalized, report):
                    stuck.append(str(payout["id"]))
            except ChainUnavailable:
                raise  # the node: the whole run waits for the next tick
            except (PayflowError, asyncpg.PostgresError) as error:
                # one payout's trouble never holds up the others; the next run retries it
                report.errors += 1
                log.error(
                    "payflow.payouts.track_failed",
                    payout_id=str(payout["id"]),
                    error=f"{type(error).__name__}: {error}",
                )
        report.stuck = len(stuck)
        report.pending = [str(p["id"]) for p in open_rows]
        if stuck:
            await self.alerts.fire(
                "payouts.stuck",
                Severity.WARNING,
                f"{len(stuck)} payout transaction(s) stuck and cannot be bumped further",
                details={"chain": self.chain, "payouts": stuck[:20]},
            )
        else:
            await self.alerts.resolve("payouts.stuck")

    async def _track_one(self, payout: Any, finalized: int, report: TickReport) -> bool:
        """Settle, re-send or bump one payout; True when it is stuck beyond help."""
        async with self.pool.acquire() as conn:
            txs = await conn.fetch(SQL["payout_txs"], payout["id"])
        landed = await self._landed(txs)
        if landed is not None:
            await self._on_landed(payout, landed, finalized, report)
            return False
        if payout["landed_tx_hash"] is not None:
            log.warning(
                "payflow.payouts.dropped",
                payout_id=str(payout["id"]),
                tx_hash=payout["landed_tx_hash"],
            )
            async with self.pool.acquire() as conn, transaction(conn, self.settings):
                await conn.execute(SQL["clear_landed"], payout["id"])
        latest = txs[-1]
        age = time.time() - latest["created_at"].timestamp()
        stuck = False
        if payout["status"] == PayoutStatus.SENT and age >= self.settings.payout_stuck_after_s:
            if await self.bump(payout, latest):
                report.bumped += 1
                PAYOUTS.labels("bumped").inc()
                return False
            stuck = True  # at the fee ceiling: keep the latest attempt in the mempool
        signed = SignedTx(raw=latest["raw_tx"], tx_hash=latest["tx_hash"])
        outcome = await self.send(payout["id"], signed)
        report.rebroadcast += 1
        return stuck or outcome is Broadcast.NO_FUNDS

    async def _landed(self, txs: list[Any]) -> Landed | None:
        calls = [("eth_getTransactionReceipt", [tx["tx_hash"]]) for tx in txs]
        receipts = await self.rpc.batch(calls)
        for receipt in receipts:
            if receipt:
                gas = hex_int(receipt["gasUsed"]) or 0
                price = hex_int(receipt.get("effectiveGasPrice")) or 0
                return Landed(
                    tx_hash=receipt["transactionHash"].lower(),
                    status=hex_int(receipt["status"]) or 0,
                    block_number=hex_int(receipt["blockNumber"]) or 0,
                    block_hash=receipt["blockHash"].lower(),
                    fee_wei=gas * price,
                )
        return None

    async def _on_landed(
        self, payout: Any, landed: Landed, finalized: int, report: TickReport
    ) -> None:
        if payout["status"] == PayoutStatus.SIGNED:  # mined before we recorded the send
            await self.mark_sent(payout["id"], None)
        async with self.pool.acquire() as conn, transaction(conn, self.settings):
            await conn.execute(
                SQL["record_landed"],
                payout["id"],
                landed.tx_hash,
                landed.status,
                landed.block_number,
                landed.block_hash,
            )
        if not await self.is_final(landed, finalized):
            return
        outcome = await settle(self.pool, self.settings, payout["id"], landed)
        if outcome == PayoutStatus.CONFIRMED:
            report.confirmed += 1
        elif outcome == PayoutStatus.FAILED:
            report.failed += 1
        if outcome is not None:
            PAYOUTS.labels(outcome).inc()
        log.info(
            "payflow.payouts.settled",
            payout_id=str(payout["id"]),
            outcome=outcome,
            tx_hash=landed.tx_hash,
        )

    async def bump(self, payout: Any, latest: Any) -> bool:
        """Replace a stuck transaction: same nonce, fees up by `PAYOUT_FEE_BUMP_PERCENT`
        (at least the +10% nodes require), capped at `PAYOUT_MAX_FEE_PER_GAS_WEI`.
        The new attempt is stored before it is sent. False when the cap forbids it."""
        fees = bumped_fees(self.settings, latest, await self.fees())
        if fees is None:
            return False
        wallet = self.wallets.get(payout["hot_wallet"])
        if wallet is None:
            return False
        chain_id = await self.chain_id()
        async with self.pool.acquire() as conn, transaction(conn, self.settings):
            row = await conn.fetchrow(SQL["lock_open_payout"], payout["id"])
            if row is None:
                return False
            attempt = await conn.fetchval(SQL["next_attempt"], payout["id"])
            to, value, data = payout_call(row)
            signed = wallet.sign(
                chain_id=chain_id,
                nonce=int(row["nonce"]),
                to=to,
                value=value,
                data=data,
                fees=fees,
            )
            await self._store(
                conn, row["id"], attempt, wallet.address, int(row["nonce"]), signed, fees
            )
        log.warning(
            "payflow.payouts.fee_bumped",
            payout_id=str(payout["id"]),
            attempt=attempt,
            tx_hash=signed.tx_hash,
            max_fee_per_gas=fees.max_fee_per_gas,
        )
        await self.send(payout["id"], signed)
        return True
