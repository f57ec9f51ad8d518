"""The payout engine: sign held payouts exactly once, broadcast, track, bump, settle.
Signing lives in `signing.py`, tracking (receipts, proof, bumps, stalls) in `tracking.py`;
this class holds the chain, the wallets and the steps both share.

Nonce protocol (docs/payouts.md): in ONE transaction the held payout is locked, the
nonce is taken from `hot_wallets` (row lock), the transaction is signed and its raw
bytes and hash are stored (`payout_txs`), and the payout becomes `signed`. Only after
that commit is anything broadcast. Every later step resends those stored bytes; a fee
bump signs a new attempt with the SAME nonce, stored the same way before it is sent.
Whichever attempt's receipt the node shows is the one settled, once (`settle.py`), and
only as far as the receipt proves the transfer (`proof.py`).
"""

from __future__ import annotations

from typing import Any

import asyncpg
import structlog

from payflow.alerts import AlertSink, LogAlertSink
from payflow.chain.finality import FinalityOracle
from payflow.chain.identity import check_signing_chain
from payflow.chain.payouts import signing, tracking
from payflow.chain.payouts.broadcast import Answer, Broadcast, broadcast_answer
from payflow.chain.payouts.holds import SQL
from payflow.chain.payouts.plan import TickReport
from payflow.chain.payouts.settle import Landed, enqueue_notification
from payflow.chain.payouts.signer import HotWallet, SignedTx, TxFees
from payflow.chain.rpc import RpcClient, hex_int
from payflow.config import ChainSettings, DatabaseSettings, PayoutSettings
from payflow.db.tx import transaction
from payflow.metrics import PAYOUTS

log = structlog.get_logger("payflow.payouts")


class PayoutEngine:
    """One chain, its RPC client and its hot wallet(s). Safe to run in several processes:
    every step is a compare-and-set or a row lock in PostgreSQL. `settings` is the payouts
    slice; its transactions keep `database`'s bounds, and the chain's expected id comes
    from `chains`."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: PayoutSettings,
        rpc: RpcClient,
        wallets: list[HotWallet],
        *,
        database: DatabaseSettings,
        chains: ChainSettings,
        finality: FinalityOracle | None = None,
        alerts: AlertSink | None = None,
    ) -> None:
        if not wallets:
            raise ValueError("a payout engine needs at least one hot wallet")
        self.pool = pool
        self.settings = settings
        self.database = database
        self.chains = chains
        self.rpc = rpc
        self.chain = settings.payout_chain
        self.wallets = {wallet.address: wallet for wallet in wallets}
        self.finality = finality
        self.alerts: AlertSink = alerts if alerts is not None else LogAlertSink()
        self._known_wallets: set[str] = set()
        self.next_wallet = 0  # round-robin position among the wallets

    async def chain_id(self) -> int:
        """`eth_chainId`, asked before EVERY signing (the endpoint behind the RPC URL may
        have changed since the last one) and checked against the chain's expected id
        (`NodeMisconfigured`: another network or no chain id, nothing signed)."""
        raw = await self.rpc.call("eth_chainId")
        return await check_signing_chain(self.pool, self.chains, self.chain, raw)

    async def ensure_wallets(self) -> None:
        """A `hot_wallets` row per wallet, starting at the chain's pending nonce."""
        for address in self.wallets:
            if address in self._known_wallets:
                continue
            count = hex_int(await self.rpc.call("eth_getTransactionCount", address, "pending"))
            async with self.pool.acquire() as conn, transaction(conn, self.database):
                await conn.execute(SQL["ensure_hot_wallet"], self.chain, address, count)
            self._known_wallets.add(address)

    async def base_fee(self) -> int:
        """The latest block's base fee per gas (wei; 0 before EIP-1559)."""
        block = await self.rpc.get_block("latest")
        return hex_int(block.get("baseFeePerGas") if block else None) or 0

    async def fees(self) -> TxFees:
        """First-attempt fees: priority `PAYOUT_PRIORITY_FEE_WEI`, max 2 x base + priority,
        never above `PAYOUT_MAX_FEE_PER_GAS_WEI` (the ceiling the hold was computed at).
        The gas limit is filled in per payout."""
        base = await self.base_fee()
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

    # --- signing (signing.py) -------------------------------------------------------

    async def sign_held(self, report: TickReport) -> None:
        """Sign (exactly once) and send the held payouts the hot wallets can pay now."""
        await signing.sign_held(self, report)

    async def sign_one(self, payout: Any, wallet: HotWallet, fees: TxFees) -> SignedTx | None:
        """Allocate the nonce, sign, store, mark signed (one transaction); None when the
        payout is no longer held."""
        return await signing.sign_one(self, payout, wallet, fees)

    async def store(
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

    async def send(self, payout_id: Any, signed: SignedTx) -> Answer:
        """Broadcast stored bytes; on acceptance record it (signed -> sent + notification)."""
        answer = await broadcast_answer(self.rpc, signed.raw, signed.tx_hash)
        if answer.outcome is Broadcast.ACCEPTED:
            await self.mark_sent(payout_id, signed.tx_hash)
        return answer

    async def mark_sent(self, payout_id: Any, tx_hash: str | None) -> None:
        async with self.pool.acquire() as conn, transaction(conn, self.database):
            if tx_hash is not None:
                await conn.execute(SQL["mark_broadcast"], tx_hash)
            row = await conn.fetchrow(SQL["mark_sent"], payout_id)
            if row is not None:
                await enqueue_notification(conn, row, tx_hash=tx_hash)
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
        """Receipts of every signed or sent payout: settle, re-send, bump, mark stalls."""
        await tracking.track(self, report)

    async def landed(self, payout: Any, txs: list[Any]) -> Landed | None:
        """The mined transaction of `payout` among `txs`, with what its receipt proves."""
        return await tracking.landed(self, payout, txs)
