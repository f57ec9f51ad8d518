"""`payflow bench payouts`: payouts/s from hold to broadcast against anvil.

Three phases in one run, on one throwaway database and one fresh anvil node:
1. one hot wallet: N holds (one transaction each, like the API), then one engine signs
   (nonce + raw tx committed first) and broadcasts them all;
2. several hot wallets: the same N, with one engine per wallet running concurrently
   (they share the held queue through `FOR UPDATE SKIP LOCKED`);
3. the ceiling: a bare loop that signs and sends as many transactions, no database.
The last line is `key=value`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal

import asyncpg
from eth_account import Account
from pydantic import SecretStr

from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.holds import place_payout
from payflow.chain.payouts.plan import TickReport
from payflow.chain.payouts.signer import HotWallet, TxFees
from payflow.chain.rpc import RpcClient
from payflow.config import Settings
from payflow.db.pool import create_pool
from payflow.db.tx import transaction
from payflow_lab.anvil import AnvilNode
from payflow_lab.bench.common import bench_database, result_line, setup_url

CHAIN = "BENCH_ANVIL"
WEI = 10**18


@dataclass(frozen=True, slots=True)
class PayoutBenchConfig:
    payouts: int = 200
    wallets: int = 4


def _key() -> str:
    return "0x" + bytes(Account.create().key).hex()


async def _hold_all(pool: asyncpg.Pool, settings: Settings, account: uuid.UUID, n: int) -> None:
    target = Account.create().address.lower()
    for _ in range(n):
        async with pool.acquire() as conn, transaction(conn, settings):
            row = await conn.fetchrow("SELECT id, asset FROM accounts WHERE id = $1", account)
            await place_payout(
                conn,
                settings.payouts,
                merchant_id=uuid.UUID(int=7),
                idempotency_key=uuid.uuid4().hex,
                account=row,
                amount=Decimal("0.001"),
                to_address=target,
                chain=CHAIN,
                trace_id=None,
            )


async def _phase(
    pool: asyncpg.Pool,
    settings: Settings,
    rpc: RpcClient,
    anvil: AnvilNode,
    wallets: int,
    account: uuid.UUID,
    n: int,
) -> float:
    """Seconds from the first hold to the last broadcast of `n` payouts, one engine per
    hot wallet running concurrently."""
    before = await pool.fetchval("SELECT count(*) FROM payouts WHERE status = 'sent'")
    keys = [_key() for _ in range(wallets)]
    for key in keys:
        await anvil.set_balance(Account.from_key(key).address.lower(), 1000 * WEI)
    engines = [
        PayoutEngine(
            pool,
            settings.payouts,
            rpc,
            [HotWallet(SecretStr(k))],
            database=settings.database,
            chains=settings.chain,
        )
        for k in keys
    ]
    for engine in engines:
        await engine.ensure_wallets()
    start = time.perf_counter()
    await _hold_all(pool, settings, account, n)
    held = n
    while held:  # PAYOUT_BATCH_SIZE payouts per pass, as the scheduler job does
        await asyncio.gather(*(engine.sign_held(TickReport()) for engine in engines))
        held = await pool.fetchval("SELECT count(*) FROM payouts WHERE status = 'held'")
    elapsed = time.perf_counter() - start
    sent = await pool.fetchval("SELECT count(*) FROM payouts WHERE status = 'sent'")
    if sent - before < n:
        raise RuntimeError(f"only {sent - before} of {n} payouts were sent")
    return elapsed


async def _bare(rpc: RpcClient, anvil: AnvilNode, n: int) -> float:
    wallet = HotWallet(SecretStr(_key()))
    await anvil.set_balance(wallet.address, 1000 * WEI)
    chain_id = int(await rpc.call("eth_chainId"), 16)
    to = Account.create().address.lower()
    fees = TxFees(21_000, 100_000_000_000, 1_000_000_000)
    start = time.perf_counter()
    for nonce in range(n):
        signed = wallet.sign(
            chain_id=chain_id, nonce=nonce, to=to, value=10**15, data="0x", fees=fees
        )
        await rpc.send_raw_transaction(signed.raw)
    return time.perf_counter() - start


async def run_payouts_bench(settings: Settings, config: PayoutBenchConfig) -> bool:
    """Print the three figures and their ratios; True when every payout was sent."""
    n = config.payouts
    anvil = AnvilNode().start()
    try:
        async with bench_database(settings) as url:
            admin = await asyncpg.connect(setup_url(settings, url))
            try:
                await admin.execute(
                    "INSERT INTO chains (chain, native_asset, native_decimals)"
                    " VALUES ($1, 'ETH', 18)",
                    CHAIN,
                )
                account = await admin.fetchval(
                    "INSERT INTO accounts (asset, initial_balance) VALUES ('ETH', $1) RETURNING id",
                    Decimal(10 * n),
                )
                # The opening arrives as a balanced transfer (opening:ETH -> the account).
                await admin.execute("SELECT ledger_post_opening($1, $2)", account, Decimal(10 * n))
            finally:
                await admin.close()
            bench = settings.model_copy(
                update={
                    "database_url": url,
                    "payout_chain": CHAIN,
                    "evm_chains": {
                        CHAIN: {"rpc_url": anvil.url, "policy": "finalized", "chain_id": 1}
                    },
                }
            )
            pool = await create_pool(bench, min_size=2, max_size=config.wallets + 4)
            try:
                async with RpcClient(anvil.url, chain=CHAIN) as rpc:
                    one = await _phase(pool, bench, rpc, anvil, 1, account, n)
                    several = await _phase(pool, bench, rpc, anvil, config.wallets, account, n)
                    bare = await _bare(rpc, anvil, n)
            finally:
                await pool.close()
    finally:
        anvil.stop()
    one_rate, several_rate, bare_rate = n / one, n / several, n / bare
    print(f"one wallet       : {n} payouts hold->broadcast in {one:.2f} s = {one_rate:.1f}/s")
    print(
        f"{config.wallets} wallets        : {n} payouts in {several:.2f} s = {several_rate:.1f}/s"
    )
    print(f"bare sign+send   : {n} transactions in {bare:.2f} s = {bare_rate:.1f}/s")
    print(
        result_line(
            payouts=n,
            wallets=config.wallets,
            one_wallet_per_s=f"{one_rate:.1f}",
            several_wallets_per_s=f"{several_rate:.1f}",
            bare_sign_send_per_s=f"{bare_rate:.1f}",
            one_vs_bare=f"{one_rate / bare_rate:.3f}",
            several_vs_bare=f"{several_rate / bare_rate:.3f}",
        )
    )
    return True
