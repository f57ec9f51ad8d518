"""Placing a payout: the hold, the payout row and its `held` notification, in the
caller's transaction (the API's, under the Idempotency-Key's lock).

Invariant: `accounts.held` only grows through `place_hold`, one guarded UPDATE under the
account's row lock (`balance - held >= hold`), so concurrent requests can never hold
more than the balance; the CHECK `accounts_held_within_balance` backs it up.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from uuid import UUID

import asyncpg

from payflow.chain.payouts.events import record_payout_event
from payflow.chain.payouts.records import TOPIC_PAYOUT_NOTIFICATION, PayoutStatus
from payflow.chain.payouts.sinks import known_sink
from payflow.config import PayoutSettings
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.errors import AccountFrozen, BadInput, InsufficientFunds
from payflow.money import add, from_base_units, to_base_units
from payflow.outbox.writer import enqueue

SQL = load_queries("payflow.chain.payouts")


def configured_hot_wallets(settings: PayoutSettings) -> set[str]:
    """The hot-wallet address of `ETH_HOT_WALLET_KEY` when set (a keystore is not
    decrypted per request: its address is refused once the engine has recorded it in
    `hot_wallets`, before it signs anything)."""
    if settings.eth_hot_wallet_key is None:
        return set()
    from payflow.chain.payouts.signer import HotWallet, HotWalletKeyInvalid

    try:
        return {HotWallet(settings.eth_hot_wallet_key).address}
    except HotWalletKeyInvalid:
        return set()


class PayoutRefused(BadInput):
    """The payout cannot be made at all (chain, asset, address); `field` names the input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class PayoutKeyReused(Exception):
    """The Idempotency-Key already made a payout with other details."""


@dataclass(frozen=True, slots=True)
class PayoutAsset:
    """How an asset leaves on a chain: `contract` None for the native asset."""

    contract: str | None
    decimals: int


async def payout_asset(conn: Connection, chain: str, asset: str) -> PayoutAsset:
    """The registry's answer for paying `asset` on `chain`; `PayoutRefused` when none or
    ambiguous (two registered contracts for one asset: an operator must choose)."""
    rows = await conn.fetch(SQL["payout_asset"], chain, asset)
    if len(rows) != 1:
        why = "is not registered" if not rows else "has several registered contracts"
        raise PayoutRefused("body.chain", f"asset {asset} {why} on chain {chain}")
    return PayoutAsset(contract=rows[0]["contract"], decimals=int(rows[0]["decimals"]))


def fee_hold(settings: PayoutSettings, target: PayoutAsset) -> Decimal:
    """The fee held with a payout, at its maximum, in the account's asset.

    Native: gas limit x `PAYOUT_MAX_FEE_PER_GAS_WEI` (the ceiling fee bumps never pass).
    Token: `PAYOUT_TOKEN_FEE` (the gas is paid in ETH by the hot wallet).
    """
    if target.contract is None:
        wei = settings.payout_native_gas_limit * settings.payout_max_fee_per_gas_wei
        return from_base_units(wei, target.decimals)
    return settings.payout_token_fee


def payout_event(row: Any, status: str | None = None) -> dict[str, Any]:
    """The notification payload of a payout state change (amounts as strings)."""
    return {
        "version": 1,
        "type": f"payout.{status or row['status']}",
        "payout_id": str(row["id"]),
        "account_id": str(row["account_id"]),
        "asset": row["asset"],
        "amount": format(row["amount"], "f"),
        "chain": row["chain"],
        "to_address": row["to_address"],
        "tx_hash": row["landed_tx_hash"],
    }


async def place_payout(
    conn: Connection,
    settings: PayoutSettings,
    *,
    merchant_id: UUID,
    idempotency_key: str,
    account: Any,
    amount: Decimal,
    to_address: str,
    chain: str,
    trace_id: str | None,
) -> tuple[Any, bool]:
    """Hold `amount` + fee for a payout to `to_address` and record it; (row, created).

    The caller owns the transaction. A payout already made under the key is returned
    with created False when it matches (account, amount, address, chain), else
    `PayoutKeyReused`. Raises `PayoutRefused` (bad chain/asset/amount, or a destination
    that is a known sink: `sinks.known_sink`),
    `InsufficientFunds` (available < hold; nothing is held), `AccountFrozen`.
    """
    to_address = to_address.lower()  # every address payflow stores or compares is lower case
    existing = await conn.fetchrow(SQL["payout_by_key"], merchant_id, idempotency_key)
    if existing is not None:
        same = (
            existing["account_id"] == account["id"]
            and existing["amount"] == amount
            and existing["to_address"] == to_address
            and existing["chain"] == chain
        )
        if not same:
            raise PayoutKeyReused("this Idempotency-Key was already used for another payout")
        return existing, False
    if chain != settings.payout_chain:
        raise PayoutRefused("body.chain", f"payouts are made on {settings.payout_chain} only")
    target = await payout_asset(conn, chain, account["asset"])
    sink = await known_sink(conn, SQL["known_sink"], to_address, configured_hot_wallets(settings))
    if sink is not None:
        raise PayoutRefused("body.to_address", f"{to_address} is {sink}; refused")
    try:
        to_base_units(amount, target.decimals)
    except BadInput:
        raise PayoutRefused(
            "body.amount", f"has more decimals than the token's {target.decimals}"
        ) from None
    fee = fee_hold(settings, target)
    hold = add(amount, fee)
    placed = await conn.fetchrow(SQL["place_hold"], account["id"], hold)
    if placed is None:
        state = await conn.fetchrow(SQL["account_state"], account["id"])
        if state is not None and state["status"] != "active":
            raise AccountFrozen(f"account {account['id']} is frozen")
        raise InsufficientFunds(
            f"available balance does not cover {format(hold, 'f')} {account['asset']}"
            f" (amount {format(amount, 'f')} + fee held {format(fee, 'f')})"
        )
    row = await conn.fetchrow(
        SQL["insert_payout"],
        merchant_id,
        idempotency_key,
        account["id"],
        account["asset"],
        chain,
        to_address,
        target.contract,
        target.decimals,
        amount,
        fee,
        trace_id,
    )
    if row is None:  # the key's advisory lock makes this unreachable; never hold twice
        raise PayoutKeyReused("a payout with this Idempotency-Key was made concurrently")
    await enqueue(conn, TOPIC_PAYOUT_NOTIFICATION, payout_event(row, PayoutStatus.HELD), trace_id)
    await record_payout_event(conn, row, PayoutStatus.HELD)
    return row, True


async def payout_by_key(conn: Connection, merchant_id: UUID, key: str) -> asyncpg.Record | None:
    """The merchant's payout made under Idempotency-Key `key` (a `payouts` row), or None."""
    row: asyncpg.Record | None = await conn.fetchrow(SQL["payout_by_key"], merchant_id, key)
    return row


async def payout_scoped(
    conn: Connection, payout_id: UUID, merchant_id: UUID, is_admin: bool
) -> asyncpg.Record | None:
    """The payout (a `payouts` row) if it is the merchant's, or any for an admin; else None
    (a payout of another merchant is indistinguishable from a missing one)."""
    row: asyncpg.Record | None = await conn.fetchrow(
        SQL["get_payout_scoped"], payout_id, merchant_id, is_admin
    )
    return row
