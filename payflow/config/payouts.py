"""On-chain payouts: the chain, the hot wallet, gas and fee policy, replacements and the
job's pace (docs/payouts.md)."""

from __future__ import annotations

from decimal import Decimal

from pydantic import Field, SecretStr

from payflow.config.base import Slice


class PayoutSettings(Slice):
    """The `payouts` slice (`settings.payouts`); the module's docstring says what it covers."""

    slice_name = "payouts"

    # The chain the hot wallet pays on: a `chains` row with an RPC in ETH_RPC_URL/EVM_CHAINS.
    payout_chain: str = "ETH_MAINNET"
    """The chain on-chain payouts are made on (a `chains` row whose RPC is configured by
    `ETH_RPC_URL`/`EVM_CHAINS`; its finality policy decides when a payout posts)
    (docs/payouts.md)."""
    eth_hot_wallet_key: SecretStr | None = None  # hex private key, local runs only
    """The hot wallet's private key (hex), for local runs; never logged, stored or echoed."""
    eth_hot_wallet_keystore: str | None = None  # an encrypted keystore (JSON) file
    """An encrypted JSON keystore of the hot wallet (preferred over
    `ETH_HOT_WALLET_KEY` when set)."""
    eth_hot_wallet_keystore_password: SecretStr | None = None
    """The keystore's password."""
    payout_max_fee_per_gas_wei: int = Field(default=100_000_000_000, gt=0)  # the held ceiling
    """The max fee per gas a payout may ever pay (fee bumps stop there); the fee hold is gas limit *
    this."""
    payout_priority_fee_wei: int = Field(default=1_000_000_000, ge=0)
    """The first attempt's priority fee (max fee = min(ceiling, 2 * base fee + priority))."""
    payout_native_gas_limit: int = Field(default=21_000, ge=21_000)
    """Gas limit of a native (ETH) payout."""
    payout_token_gas_limit: int = Field(default=100_000, ge=21_000)
    """Gas limit of an ERC-20 `transfer` payout."""
    payout_token_fee: Decimal = Field(default=Decimal(0), ge=0)  # per token payout, its units
    """The `withdrawal_fee` of a token payout, in the token's units (its gas is paid in ETH by the
    hot wallet)."""
    payout_stuck_after_s: float = Field(default=120.0, ge=0)
    """A sent payout transaction without a receipt this long is replaced (same nonce,
    higher fee)."""
    payout_fee_bump_percent: int = Field(default=25, ge=10, le=500)
    """Fee increase per replacement (>= 10, what nodes require)."""
    payout_interval_s: float = Field(default=5.0, gt=0)
    """How often the scheduler job `payouts` signs, sends, tracks and settles."""
    payout_batch_size: int = Field(default=100, ge=1, le=10000)
    """Payouts handled per job run and state."""
