"""Chains: the node of `ETH_MAINNET` and more EVM chains by configuration, finality,
the RPC's breaker and cache, the deposit lifecycle, chain reconciliation, derived deposit
addresses and the scanner (docs/chain.md).

Chain configuration is data: a name, an RPC URL and a confirmation policy per chain.
`ETH_MAINNET` comes from `ETH_RPC_URL` / `ETH_CONFIRMATION_POLICY` / `ETH_CHAIN_ID`; any
other EVM chain is configuration only,
`EVM_CHAINS` = `{"NAME": {"rpc_url": "...", "policy": "...", "chain_id": N}}`
(its token registry is data too: `payflow tokens add-chain`, `payflow tokens add`).

A policy is `finalized` (the node's `finalized` block tag: Ethereum L1's default) or
`confirmations:N` (final when at least N blocks sit on top of it: head - N). `safe` is
deliberately not offered (docs/chain.md, "Policies"). `payflow.chain.config` re-exports
these for the chain package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from pydantic import Field, ValidationInfo, field_validator, model_validator

from payflow.config.base import SettingsError, Slice, check_service_url, service_url
from payflow.config.xpub import check_account_xpub

ETH_MAINNET = "ETH_MAINNET"
CHAIN_NAME = re.compile(r"^[A-Z0-9_]{2,40}$")
POLICY = re.compile(r"^(finalized|confirmations:([0-9]{1,5}))$")


class PolicyKind(StrEnum):
    FINALIZED = "finalized"
    CONFIRMATIONS = "confirmations"


@dataclass(frozen=True, slots=True)
class Policy:
    """When a block is final: `finalized` tag, or `confirmations` N blocks behind head."""

    kind: PolicyKind
    confirmations: int = 0

    @classmethod
    def parse(cls, text: str) -> Policy:
        """`finalized` or `confirmations:N` (N >= 1); ValueError otherwise."""
        match = POLICY.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"confirmation policy {text!r}: use finalized or confirmations:N")
        if match.group(2) is None:
            return cls(PolicyKind.FINALIZED)
        count = int(match.group(2))
        if count < 1:
            raise ValueError("confirmations:N needs N >= 1")
        return cls(PolicyKind.CONFIRMATIONS, count)

    def __str__(self) -> str:
        if self.kind is PolicyKind.FINALIZED:
            return "finalized"
        return f"confirmations:{self.confirmations}"


@dataclass(frozen=True, slots=True)
class ChainConfig:
    """One EVM chain payflow watches: its registry name, node URL, finality policy and the
    EIP-155 chain id its node must answer (`payflow.chain.identity` checks it)."""

    name: str
    rpc_url: str
    policy: Policy
    chain_id: int = 1  # the EIP-155 id the node must answer to eth_chainId


class ChainSettings(Slice):
    """The `chain` slice (`settings.chain`); the module's docstring says what it covers."""

    slice_name = "chain"

    # ETH_RPC_URL unset: chain features are off and deposits wait, observed, never credited.
    eth_rpc_url: str | None = Field(default=None, pattern=r"^https?://")
    """The Ethereum node (JSON-RPC over http/https) of chain `ETH_MAINNET`; unset: chain features
    are off and reported deposits wait, never credited unverified (docs/chain.md)."""
    # "finalized" (the block tag) or "confirmations:N" (head - N); see docs/chain.md.
    eth_confirmation_policy: str = Field(
        default="finalized", pattern=r"^(finalized|confirmations:[0-9]{1,5})$"
    )
    """When an `ETH_MAINNET` block is final: `finalized` (the node's tag) or `confirmations:N` (head
    - N); `safe` is refused (docs/chain.md#policies)."""
    eth_chain_id: int = Field(default=1, gt=0)
    """The EIP-155 chain id ETH_RPC_URL's node must answer to `eth_chainId` (and the `chains` row of
    ETH_MAINNET must hold): another network stops chain work in one line."""
    rpc_timeout_s: float = Field(default=5.0, gt=0, le=120)
    """Bound of every JSON-RPC request to a node."""
    evm_chains: dict[str, dict[str, str | int]] = Field(default_factory=dict)
    """More EVM chains by configuration: JSON `{"NAME": {"rpc_url": "…", "policy":
    "finalized|confirmations:N", "chain_id": 137}}` (`chain_id` required; register the chain and its
    tokens with `payflow tokens`)."""
    chain_identity_recheck_s: float = Field(default=300.0, gt=0)
    """How long a node's identity (`eth_chainId`) and capabilities (the policy's tag) stay checked
    before a long-running process (the scanner) asks again."""
    chain_assignment_slack_s: float = Field(default=60.0, ge=0, le=86400)
    """A transfer is creditable only if its block's timestamp is at or after the deposit address's
    assignment minus this slack; earlier value is `before_assignment` for the scanner, the
    webhooks and recon alike (docs/chain.md)."""
    chain_breaker_failures: int = Field(default=3, ge=1)
    """Consecutive unavailable RPC calls that open a chain's circuit breaker."""
    chain_breaker_open_s: float = Field(default=30.0, gt=0)
    """How long an open breaker refuses calls before one half-open probe."""
    chain_cache_final_ttl_s: int = Field(default=7 * 24 * 3600, ge=1)
    """Redis cache lifetime of answers about final blocks (hashes, receipts, transactions)."""
    chain_cache_recent_ttl_s: float = Field(default=2.0, gt=0)
    """Redis cache lifetime of everything else (head, finalized height, non-final blocks, missing
    receipts)."""
    chain_deposits_interval_s: float = Field(default=3.0, gt=0)
    """Interval of the scheduler job `chain_deposits` (verify, credit when final, orphan)."""
    chain_deposits_batch: int = Field(default=200, ge=1, le=10000)
    """Reports and deposits handled per chain per run."""
    chain_recheck_s: float = Field(default=3.0, gt=0)
    """First wait before a not-yet-final deposit or a report without a receipt is checked again
    (doubling, at most 300 s)."""
    chain_report_grace_s: float = Field(default=900.0, ge=0)
    """How long a report whose transaction the node does not know waits (not mined yet?) before it
    is refuted."""
    chain_orphan_recheck_s: float = Field(default=3600.0, ge=0)
    """How long an orphaned deposit is watched for re-inclusion."""
    chain_reorg_watch_blocks: int = Field(default=64, ge=0)
    """On `confirmations:N` chains: how many blocks below head credited deposits are watched for a
    deeper reorg (reversal `reorg:<transfer id>`)."""
    recon_chain_interval_s: float = Field(default=86400.0, gt=0)
    """Interval of the job `recon_chain` (chain reconciliation)."""
    recon_chain_window_blocks: int = Field(default=7200, ge=1)
    """Final blocks the scheduled chain reconciliation re-reads (about a day on Ethereum)."""
    recon_chain_block_span: int = Field(default=1000, ge=1, le=100000)
    """Blocks per `eth_getLogs` request of the chain reconciliation."""
    recon_chain_address_batch: int = Field(default=100, ge=1, le=1000)
    """Deposit addresses per `eth_getLogs` request (topic2)."""
    eth_deposit_xpub: str | None = None
    """Account-level extended PUBLIC key of m/44'/60'/a' (depth 3, `xpub…` or `tpub…`); `POST
    /api/v1/accounts/{id}/deposit-addresses` without an address derives m/44'/60'/a'/0/i from it
    (the index kept in PostgreSQL). Unset: that request answers 503 `derivation-unavailable`. A
    key at another depth, a private key (`xprv`) or other version bytes stop every role at start
    with one line (docs/chain.md, "Derived deposit addresses")."""
    eth_scanner_lag_blocks: int = Field(default=3, ge=0, le=10000)
    """The scanner reads up to head minus this many blocks, so a lagging RPC replica cannot hide
    logs (docs/chain.md, "Scanner")."""
    eth_scanner_poll_interval_s: float = Field(default=2.0, gt=0)
    """How often a caught-up scanner asks for a new head (and retries after a node or database
    outage)."""
    eth_scanner_batch_blocks: int = Field(default=50, ge=1, le=2000)
    """Blocks per scanner step: one batched `eth_getBlockByNumber`, the `eth_getLogs` calls and one
    receipt batch per step."""
    eth_scanner_address_batch: int = Field(default=500, ge=1, le=10000)
    """Deposit addresses per `eth_getLogs` topic filter."""
    # First cursor when the chain has none (unset: head - lag; older blocks are recon's).
    eth_scanner_start_block: int | None = Field(default=None, ge=0)
    """The first block of a chain with no scanner cursor yet (unset: head minus lag; older blocks
    are `payflow recon --chain`'s)."""
    eth_scanner_keep_blocks: int = Field(default=256, ge=8, le=100000)
    """Walked block hashes kept in `chain_scanner_blocks` to find a reorg's fork point."""
    eth_scanner_writers: int = Field(default=4, ge=1, le=32)  # connections observing at once
    """Connections a scanner step observes its transfers on at once."""
    eth_scanner_max_lag_blocks: int = Field(default=200, ge=1)
    """Head lag (blocks between the node's head and the scanner's cursor) above which the scanner
    fires `chain.scanner_lag:<chain>` and `payflow status` reports a problem."""

    @field_validator("eth_rpc_url")
    @classmethod
    def _chain_service_url_valid(cls, value: str | None, info: ValidationInfo) -> str | None:
        return service_url(value, info.field_name)

    @field_validator("eth_deposit_xpub")
    @classmethod
    def _deposit_xpub_account_level(cls, value: str | None) -> str | None:
        """The account-level extended PUBLIC key (depth 3, m/44'/60'/a'), checked whole
        at start-up (`payflow.config.xpub.check_account_xpub`): a key of another level
        would derive addresses the owner's wallet never scans. The one-line reason never
        echoes the key. Whitespace around it (a pasted line end, a space) is not part of
        the key: it is dropped, so the setting holds the key alone."""
        if value is None:
            return None
        value = value.strip()
        check_account_xpub(value)  # XpubInvalid is a ValueError: pydantic reports its message
        return value

    @model_validator(mode="after")
    def _chains_valid(self) -> ChainSettings:
        """EVM_CHAINS (and ETH_CONFIRMATION_POLICY) parse whichever role starts."""
        try:
            chain_configs(self)
        except SettingsError as error:  # one line already; a ValueError for pydantic
            raise ValueError(str(error).removeprefix("setting ")) from None
        return self


def _chain_id(name: str, value: str | int | None) -> int:
    """`EVM_CHAINS.<name>.chain_id` as a positive int; `SettingsError` otherwise."""
    text = str(value if value is not None else "").strip()
    if not text.isdigit() or int(text) <= 0:
        raise SettingsError(
            f"setting EVM_CHAINS is invalid: {name}.chain_id must be the chain's EIP-155 id"
            f" (a positive integer), got {value!r}"
        )
    return int(text)


def chain_configs(settings: ChainSettings) -> dict[str, ChainConfig]:
    """Every configured chain by name; empty when no RPC URL is set (chain features off).

    Raises `SettingsError` (one line naming the setting) on a malformed entry.
    """
    configs: dict[str, ChainConfig] = {}
    if settings.eth_rpc_url:
        try:
            policy = Policy.parse(settings.eth_confirmation_policy)
        except ValueError as error:
            raise SettingsError(f"setting ETH_CONFIRMATION_POLICY is invalid: {error}") from None
        configs[ETH_MAINNET] = ChainConfig(
            ETH_MAINNET, settings.eth_rpc_url, policy, settings.eth_chain_id
        )
    for name, entry in settings.evm_chains.items():
        if not CHAIN_NAME.fullmatch(name) or name in configs:
            raise SettingsError(f"setting EVM_CHAINS is invalid: chain name {name!r}")
        url = str(entry.get("rpc_url", ""))
        try:
            check_service_url(url, ("http", "https"))
        except ValueError as error:
            raise SettingsError(f"setting EVM_CHAINS is invalid: {name}.rpc_url {error}") from None
        try:
            policy = Policy.parse(str(entry.get("policy", "finalized")))
        except ValueError as error:
            raise SettingsError(f"setting EVM_CHAINS is invalid: {name}.policy: {error}") from None
        configs[name] = ChainConfig(name, url, policy, _chain_id(name, entry.get("chain_id")))
    return configs
