"""The owners' treasury addresses (`payflow treasury add|list|remove`, migration 0030).

An outflow from a deposit address to a registered treasury address is booked by the
custody recon (`payflow.chain.custody`) as custody -> treasury; an outflow anywhere else
is a mismatch. Addresses are checked (`checked_evm_address`: EIP-55 checksum, not zero);
each registration keeps who added it and when, and a removal who and when.
"""

from __future__ import annotations

import asyncpg

from payflow.chain.addresses import checked_evm_address
from payflow.chain.deposits import SQL
from payflow.config import DatabaseSettings
from payflow.db.pool import tool_pool


def _who(by: str) -> str:
    if not 1 <= len(by) <= 200 or not by.isprintable():
        raise ValueError("--by is 1 to 200 printable characters (who does it, audited)")
    return by


async def add_treasury(
    settings: DatabaseSettings, chain: str, address: str, by: str
) -> tuple[str, bool]:
    """Register `address` on `chain`; (its lower-case form, whether it was new). Raises
    `ValueError` (one line for the operator) before any connection for a bad address or
    `by`, and for a chain payflow does not know."""
    checked = checked_evm_address(address)
    _who(by)
    async with tool_pool(settings) as pool:
        known = await pool.fetchval("SELECT 1 FROM chains WHERE chain = $1", chain)
        if known is None:
            raise ValueError(f"unknown chain {chain!r} (payflow tokens add-chain)")
        created = await pool.fetchval(SQL["treasury_add"], chain, checked, by)
    return checked, created is not None


async def remove_treasury(settings: DatabaseSettings, chain: str, address: str, by: str) -> bool:
    """Unregister `address` on `chain` (the row stays, with who and when); False when it
    was not registered."""
    checked = checked_evm_address(address)
    _who(by)
    async with tool_pool(settings) as pool:
        return await pool.fetchval(SQL["treasury_remove"], chain, checked, by) is not None


async def list_treasury(settings: DatabaseSettings) -> list[asyncpg.Record]:
    async with tool_pool(settings) as pool:
        return list(await pool.fetch(SQL["treasury_list"]))
