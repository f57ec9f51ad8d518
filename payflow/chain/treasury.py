"""The owners' treasury addresses (`payflow treasury add|list|remove`, migration 0031).

An outflow from a deposit address to a registered treasury address is booked by the
custody recon (`payflow.chain.custody`) as custody -> treasury; an outflow anywhere else
is a mismatch. Addresses are checked (`checked_evm_address`: EIP-55 checksum, not zero);
each registration keeps who added it and when, and a removal who and when.
"""

from __future__ import annotations

import asyncpg

from payflow.chain.addresses import checked_evm_address
from payflow.chain.deposits import SQL
from payflow.config import Settings
from payflow.db.pool import tool_pool


async def add_treasury(settings: Settings, chain: str, address: str, by: str) -> tuple[str, bool]:
    """Register `address` on `chain`; (its lower-case form, whether it was new)."""
    checked = checked_evm_address(address)
    async with tool_pool(settings.database) as pool:
        known = await pool.fetchval("SELECT 1 FROM chains WHERE chain = $1", chain)
        if known is None:
            raise ValueError(f"unknown chain {chain!r} (payflow tokens add-chain)")
        created = await pool.fetchval(SQL["treasury_add"], chain, checked, by)
    return checked, created is not None


async def remove_treasury(settings: Settings, chain: str, address: str, by: str) -> bool:
    checked = checked_evm_address(address)
    async with tool_pool(settings.database) as pool:
        return await pool.fetchval(SQL["treasury_remove"], chain, checked, by) is not None


async def list_treasury(settings: Settings) -> list[asyncpg.Record]:
    async with tool_pool(settings.database) as pool:
        return list(await pool.fetch(SQL["treasury_list"]))
