"""The token registry: which asset, and how many decimals, a chain's transfer moves.

`chains` holds each chain's native asset; `chain_tokens` maps (chain, contract address)
to an asset code and the contract's on-chain decimals. A payload's symbol, decimals or
asset code is only a claim checked against these rows; it never decides money.

Registration rule: a token's (or native asset's) decimals must not exceed its asset's
scale (`assets.scale`), so every on-chain amount converts to the asset exactly. More
EVM chains are data: `payflow tokens add-chain`, then `payflow tokens add`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import cast

import asyncpg

from payflow.config import ChainSettings, DatabaseSettings
from payflow.db.pool import tool_pool
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.errors import BadInput, Conflict
from payflow.ingress.payloads import CHAIN, EVM_ADDRESS, ProviderEvent, UnmatchedReason
from payflow.ledger.accounts import asset_scale

SQL = load_queries("payflow.ingress")
# Seeded by migration 0005 (with USDT, WBTC, DAI); named here for tools such as the bench.
USDC_ETH_MAINNET = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"


@dataclass(frozen=True, slots=True)
class RegisteredAsset:
    """What payflow knows a transfer moves: asset code and on-chain decimals (0..18)."""

    asset: str
    decimals: int


@dataclass(frozen=True, slots=True)
class TokenRow:
    """One registry row; `contract` is None for the chain's native asset."""

    chain: str
    contract: str | None
    asset: str
    decimals: int
    created: bool = False


class UnknownToken(Exception):
    """The payload's asset claim does not match the registry; `reason` and `detail` say why."""

    def __init__(self, reason: UnmatchedReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


async def resolve_asset(conn: asyncpg.Connection, event: ProviderEvent) -> RegisteredAsset:
    """The registry's asset for `event`: the chain's native asset, or the token behind
    `(chain, contract)`. Raises `UnknownToken` (`unknown_chain` / `unknown_token`) when
    the chain or contract is not registered, or when the payload's asset code or
    decimals disagree with the registry."""
    if event.native:
        row = await conn.fetchrow(SQL["chain_native"], event.chain)
        if row is None:
            raise UnknownToken(
                UnmatchedReason.UNKNOWN_CHAIN, f"chain {event.chain} is not registered"
            )
        found = RegisteredAsset(row["native_asset"], row["native_decimals"])
    else:
        if event.contract is None:
            raise UnknownToken(UnmatchedReason.UNKNOWN_TOKEN, "a token needs contract_address")
        row = await conn.fetchrow(SQL["token_lookup"], event.chain, event.contract)
        if row is None:
            raise UnknownToken(
                UnmatchedReason.UNKNOWN_TOKEN, f"contract {event.contract} is not registered"
            )
        found = RegisteredAsset(row["asset"], row["decimals"])
    if event.asset is not None and event.asset != found.asset:
        raise UnknownToken(
            UnmatchedReason.UNKNOWN_TOKEN,
            f"payload names asset {event.asset}, the registry {found.asset}",
        )
    if event.decimals is not None and event.decimals != found.decimals:
        raise UnknownToken(
            UnmatchedReason.UNKNOWN_TOKEN,
            f"payload says {event.decimals} decimals, the registry {found.decimals}",
        )
    return found


async def _checked_decimals(conn: asyncpg.Connection, asset: str, decimals: int) -> None:
    scale = await asset_scale(conn, asset)  # BadInput when the asset is unknown
    if not 0 <= decimals <= scale:
        raise BadInput(
            f"decimals must be between 0 and {asset}'s scale {scale} (got {decimals}),"
            " so every on-chain amount converts exactly"
        )


async def add_chain(
    conn: asyncpg.Connection,
    chain: str,
    native_asset: str,
    native_decimals: int,
    chain_id: int | None = None,
) -> TokenRow:
    """Register a chain, its native asset and (optionally) its EIP-155 `chain_id`, which
    the chain's node must answer (`payflow.chain.identity`). Idempotent for the same
    values; a chain id is recorded on a chain registered without one; `Conflict` when the
    chain is registered with another asset, decimals or chain id; `BadInput` otherwise."""
    if CHAIN.fullmatch(chain) is None:
        raise BadInput("chain must match ^[A-Z0-9_]{2,40}$")
    if chain_id is not None and chain_id <= 0:
        raise BadInput("chain id must be a positive integer (the network's EIP-155 id)")
    await _checked_decimals(conn, native_asset, native_decimals)
    row = await conn.fetchrow(SQL["add_chain"], chain, native_asset, native_decimals, chain_id)
    assert row is not None
    stored = TokenRow(chain, None, row["native_asset"], row["native_decimals"], row["created"])
    if (stored.asset, stored.decimals) != (native_asset, native_decimals):
        raise Conflict(
            f"chain {chain} is registered with {stored.asset} ({stored.decimals} decimals)"
        )
    recorded = row["chain_id"]
    if chain_id is not None and recorded is None:
        await conn.execute(SQL["record_chain_id"], chain, chain_id)
    elif chain_id is not None and recorded != chain_id:
        raise Conflict(f"chain {chain} is registered with chain id {recorded}")
    return stored


async def add_token(
    conn: asyncpg.Connection, chain: str, contract: str, asset: str, decimals: int
) -> TokenRow:
    """Register `(chain, contract) → asset, decimals`; the contract is stored lower-case.

    Idempotent for the same values; `Conflict` when the contract is registered with
    another asset or decimals; `BadInput` for a malformed address, an unknown chain or
    asset, or decimals above the asset's scale.
    """
    if EVM_ADDRESS.fullmatch(contract) is None:
        raise BadInput("contract must be a 0x-prefixed 40-hex-digit address")
    if await conn.fetchrow(SQL["chain_native"], chain) is None:
        raise BadInput(f"chain {chain!r} is not registered (payflow tokens add-chain)")
    await _checked_decimals(conn, asset, decimals)
    row = await conn.fetchrow(SQL["add_token"], chain, contract.lower(), asset, decimals)
    assert row is not None
    stored = TokenRow(chain, row["contract"], row["asset"], row["decimals"], row["created"])
    if (stored.asset, stored.decimals) != (asset, decimals):
        raise Conflict(
            f"contract {stored.contract} on {chain} is registered as {stored.asset}"
            f" ({stored.decimals} decimals)"
        )
    return stored


async def list_tokens(conn: asyncpg.Connection, chain: str | None = None) -> list[TokenRow]:
    """Every chain's native asset (contract None) and registered tokens, by chain."""
    rows = await conn.fetch(SQL["list_tokens"], chain)
    return [TokenRow(r["chain"], r["contract"], r["asset"], r["decimals"]) for r in rows]


@asynccontextmanager
async def _tool_connection(
    settings: DatabaseSettings, *, operator: bool = False
) -> AsyncIterator[asyncpg.Connection]:
    """One connection of a small pool for one CLI command, closed afterwards; `operator`
    logs in with the migration login (the service's role may only read the registry)."""
    async with tool_pool(settings, operator=operator) as pool, pool.acquire() as proxy:
        yield cast(asyncpg.Connection, proxy)  # the proxy forwards every Connection method


async def add_chain_cli(
    settings: DatabaseSettings, chain: str, asset: str, decimals: int, chain_id: int | None = None
) -> TokenRow:
    """`payflow tokens add-chain`: `add_chain` in its own transaction."""
    async with (
        _tool_connection(settings, operator=True) as conn,
        transaction(conn, settings),
    ):
        return await add_chain(conn, chain, asset, decimals, chain_id)


async def add_token_cli(
    settings: ChainSettings,
    chain: str,
    contract: str,
    asset: str,
    decimals: int,
    *,
    database: DatabaseSettings,
) -> TokenRow:
    """`payflow tokens add`: `add_token` in its own transaction, after the node confirms
    the contract's `decimals()` when CHAIN has an RPC configured (`check_token_decimals`).

    The node is the source of truth for chain money: a registry row with the wrong
    decimals would credit every deposit of the token wrong by powers of ten: an 18-decimal
    token registered with 6 would credit 0.0001 token as 100,000,000."""
    from payflow.chain.config import chain_configs

    config = chain_configs(settings).get(chain)
    if config is not None:
        await check_token_decimals(config.rpc_url, chain, contract, decimals, settings)
    async with (
        _tool_connection(database, operator=True) as conn,
        transaction(conn, database),
    ):
        return await add_token(conn, chain, contract, asset, decimals)


DECIMALS_SELECTOR = "0x313ce567"  # ERC-20 decimals()


async def check_token_decimals(
    rpc_url: str, chain: str, contract: str, decimals: int, settings: ChainSettings
) -> None:
    """Raise `BadInput` unless the contract at `contract` on `chain` answers `decimals()`
    with `decimals` (an `eth_call` at the latest block); `ChainUnavailable` when the node
    cannot be asked. A malformed address is left to `add_token`'s own check."""
    from payflow.chain.rpc import RpcClient, RpcError

    if EVM_ADDRESS.fullmatch(contract) is None:
        return
    call = {"to": contract.lower(), "data": DECIMALS_SELECTOR}
    async with RpcClient(rpc_url, chain=chain, timeout_s=settings.rpc_timeout_s) as rpc:
        try:
            answer = await rpc.call("eth_call", call, "latest")
        except RpcError as error:
            raise BadInput(f"{contract} on {chain} does not answer decimals(): {error}") from None
    raw = answer[2:] if isinstance(answer, str) and answer.startswith("0x") else ""
    if not raw or len(raw) > 64 or any(c not in "0123456789abcdefABCDEF" for c in raw):
        raise BadInput(
            f"{contract} on {chain} has no ERC-20 decimals() (the node answered {answer!r:.80})"
        )
    on_chain = int(raw, 16)
    if on_chain != decimals:
        raise BadInput(f"{contract} on {chain} has {on_chain} decimals on chain, not {decimals}")


async def list_tokens_cli(settings: DatabaseSettings, chain: str | None) -> list[TokenRow]:
    """`payflow tokens list`: the registry, read-only."""
    async with _tool_connection(settings) as conn:
        return await list_tokens(conn, chain)
