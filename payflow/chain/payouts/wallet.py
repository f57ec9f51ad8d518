"""`payflow wallet status`: hot-wallet balances, nonces, pending and stuck payouts."""

from __future__ import annotations

from typing import Any

import asyncpg

from payflow.chain.deposits import SQL as CHAIN_SQL
from payflow.chain.payouts.holds import SQL
from payflow.chain.payouts.job import payout_chain_config
from payflow.chain.payouts.signer import wallets_from_settings
from payflow.chain.rpc import RpcClient, RpcUnavailable, hex_int
from payflow.config import ChainSettings, DatabaseSettings, PayoutSettings
from payflow.db import Connection
from payflow.db.pool import tool_pool
from payflow.errors import BadInput
from payflow.money import format_amount, from_base_units


async def wallet_status(
    pool: asyncpg.Pool, settings: PayoutSettings, rpc: RpcClient | None, addresses: list[str]
) -> dict[str, Any]:
    """{chain, wallets: [{address, balance (ETH string), chain_nonce, chain_pending_nonce,
    next_nonce, pending, lowest_pending_nonce}], stuck: [...], waiting: [...]}.
    Chain figures are None when the node cannot be asked. Amounts are strings."""
    chain = settings.payout_chain
    async with pool.acquire() as conn:
        rows = {r["address"]: r for r in await conn.fetch(SQL["wallet_rows"], chain)}
        stuck = await conn.fetch(SQL["stuck_txs"], chain, settings.payout_stuck_after_s)
        waiting = await conn.fetch(SQL["waiting_payouts"], chain)
    wallets = []
    for address in sorted(set(addresses) | set(rows)):
        row = rows.get(address)
        entry: dict[str, Any] = {
            "address": address,
            "next_nonce": None if row is None else row["next_nonce"],
            "pending": 0 if row is None else row["pending"],
            "lowest_pending_nonce": None if row is None else row["lowest_pending_nonce"],
            "balance": None,
            "chain_nonce": None,
            "chain_pending_nonce": None,
        }
        if rpc is not None:
            try:
                entry["balance"] = format_amount(
                    from_base_units(await rpc.get_balance(address), 18)
                )
                latest = await rpc.call("eth_getTransactionCount", address, "latest")
                pending = await rpc.call("eth_getTransactionCount", address, "pending")
                entry["chain_nonce"], entry["chain_pending_nonce"] = (
                    hex_int(latest),
                    hex_int(pending),
                )
            except RpcUnavailable:
                pass
        wallets.append(entry)
    return {
        "chain": chain,
        "wallets": wallets,
        "stuck": [
            {
                "payout_id": str(r["id"]),
                "wallet": r["hot_wallet"],
                "nonce": r["nonce"],
                "tx_hash": r["tx_hash"],
                "attempt": r["attempt"],
                "max_fee_per_gas": str(r["max_fee_per_gas"]),
                "since": r["created_at"].isoformat(),
            }
            for r in stuck
        ],
        "waiting": [
            {
                "payout_id": str(r["id"]),
                "asset": r["asset"],
                "amount": format_amount(r["amount"]),
                "reason": r["wait_reason"],
                "since": r["created_at"].isoformat(),
            }
            for r in waiting
        ],
    }


async def wallet_status_cli(
    settings: PayoutSettings, *, chains: ChainSettings, database: DatabaseSettings
) -> dict[str, Any]:
    """The CLI's run: a tool pool, the configured wallet(s) and RPC (when set).

    Raises `BadInput` when `PAYOUT_CHAIN` is not a chain in payflow's registry (a typo
    would otherwise print an empty, healthy-looking report)."""
    addresses = [wallet.address for wallet in wallets_from_settings(settings)]
    config = payout_chain_config(settings, chains=chains)
    async with tool_pool(database) as pool:
        async with pool.acquire() as conn:
            if await conn.fetchrow(CHAIN_SQL["native_asset"], settings.payout_chain) is None:
                raise BadInput(
                    f"PAYOUT_CHAIN {settings.payout_chain!r} is not a registered chain"
                    " (`payflow tokens list` shows them)"
                )
        if config is None:
            return await wallet_status(pool, settings, None, addresses)
        async with RpcClient(config.rpc_url, chain=config.name) as rpc:
            return await wallet_status(pool, settings, rpc, addresses)


async def stalled_counts(conn: Connection, stuck_after_s: float) -> dict[str, int]:
    """Open payouts that do not progress, counted per stall (`unaccepted`, `unmined`,
    `nonce_taken`, `transfer_mismatch`; a payout not mined `stuck_after_s` after its latest
    transaction counts as `unmined` even when no engine run marked it), every chain; ages
    on the database's clock. Empty when all progress."""
    counts: dict[str, int] = {}
    for row in await conn.fetch(SQL["stalled_payouts"], None, stuck_after_s):
        kind = row["stall"] or "unmined"
        counts[kind] = counts.get(kind, 0) + 1
    return counts
