"""What a hot wallet can still pay: its chain balances minus what its signed, not yet
mined payouts will take. A payout is signed only when this covers it, so a poor wallet
never consumes a nonce it cannot pay for: the payout waits (held, with `wait_reason`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import asyncpg

from payflow.chain.payouts.holds import SQL
from payflow.chain.payouts.signer import TxFees, balance_of_calldata
from payflow.chain.rpc import RpcClient, hex_int
from payflow.money import to_base_units


@dataclass(frozen=True, slots=True)
class Need:
    """What one payout takes from the hot wallet: wei (value + gas at its max fee) and,
    for a token payout, token units of `contract`."""

    native_wei: int
    contract: str | None = None
    token_units: int = 0


def need_of(payout: Any, fees: TxFees) -> Need:
    """The funds a payout row needs with `fees` (gas limit x max fee per gas)."""
    gas = fees.gas_limit * fees.max_fee_per_gas
    units = to_base_units(payout["amount"], int(payout["decimals"]))
    if payout["contract"] is None:
        return Need(native_wei=units + gas)
    return Need(native_wei=gas, contract=payout["contract"], token_units=units)


@dataclass(slots=True)
class WalletFunds:
    """Spendable balances of one wallet (wei and token units), decreasing as we sign."""

    native_wei: int
    tokens: dict[str, int] = field(default_factory=dict)

    def covers(self, need: Need) -> bool:
        if need.native_wei > self.native_wei:
            return False
        return need.contract is None or need.token_units <= self.tokens.get(need.contract, 0)

    def spend(self, need: Need) -> None:
        self.native_wei -= need.native_wei
        if need.contract is not None:
            self.tokens[need.contract] = self.tokens.get(need.contract, 0) - need.token_units

    def describe(self) -> dict[str, str]:
        """Spendable amounts as strings (wei / units), for alerts."""
        return {"native_wei": str(self.native_wei), **{c: str(u) for c, u in self.tokens.items()}}


async def token_balance(rpc: RpcClient, contract: str, holder: str) -> int:
    """ERC-20 `balanceOf(holder)` at latest."""
    answer = await rpc.call(
        "eth_call", {"to": contract, "data": balance_of_calldata(holder)}, "latest"
    )
    return hex_int(answer) or 0


async def load_funds(
    pool: asyncpg.Pool, rpc: RpcClient, chain: str, address: str, contracts: set[str]
) -> WalletFunds:
    """Balances at latest minus the in-flight payouts of `address` (signed, not mined)."""
    funds = WalletFunds(native_wei=await rpc.get_balance(address))
    for contract in contracts:
        funds.tokens[contract] = await token_balance(rpc, contract, address)
    async with pool.acquire() as conn:
        rows = await conn.fetch(SQL["in_flight"], chain, address)
    for row in rows:
        fees = TxFees(int(row["gas_limit"]), int(row["max_fee_per_gas"]), 0)
        need = need_of(row, fees)
        funds.spend(need)
    return funds
