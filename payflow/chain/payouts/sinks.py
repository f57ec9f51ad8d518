"""Destinations a payout must never go to: money sent there is lost or never leaves.

- the zero address and the precompiles / reserved low addresses (0x00..00 to 0x..ffff:
  precompiles 0x01..0x11 today, 0x100 on several chains; no key controls any of them);
- any registered token contract (tokens sent to a token's own contract are locked);
- any payflow hot wallet (the account is debited, nothing leaves: only gas is burnt);
- any payflow deposit address (the payout would come back as a deposit: a loop).
"""

from __future__ import annotations

from payflow.db import Connection

RESERVED_BELOW = 0x10000  # addresses under this are the zero address, precompiles, reserved


async def known_sink(
    conn: Connection, query: str, address: str, configured: set[str]
) -> str | None:
    """Why `address` (0x + 40 lower-case hex) is a sink, or None when it is not one.
    `query`: the named query `known_sink` of the payouts' queries.sql.
    `configured`: the hot-wallet addresses of this process's settings (lower case), refused
    even before the engine first recorded them."""
    if int(address, 16) < RESERVED_BELOW:
        if int(address, 16) == 0:
            return "the zero address (funds sent there are burnt)"
        return "a precompile or reserved address (funds sent there are lost)"
    if address in configured:
        return "a payflow hot wallet (nothing would leave)"
    what = await conn.fetchval(query, address)
    if what is None:
        return None
    consequence = {
        "a registered token contract": "tokens sent there are locked forever",
        "a payflow hot wallet": "nothing would leave",
        "a payflow deposit address": "the payout would come back as a deposit",
    }[what]
    return f"{what} ({consequence})"
