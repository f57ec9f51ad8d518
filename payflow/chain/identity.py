"""Is the configured node the chain we think it is, and can it answer what our policy asks?

Every chain has an expected EIP-155 chain id: the setting (`ETH_CHAIN_ID` for
`ETH_MAINNET`, `EVM_CHAINS.<name>.chain_id`) and the `chains` row's `chain_id` (migration
0027; `ETH_MAINNET` is 1). `check_node` compares both with the node's `eth_chainId`, and
probes the capability the finality policy needs (the `finalized` block tag). Any
disagreement raises `NodeMisconfigured` with ONE line that names the chain, what was
expected, what the node said and what to change; the caller stops that chain's work
(the deposit job, the scanner, recon, payout signing) and raises the alert
`chain.node:<chain>`. Nothing is credited or signed for a chain that failed the check.

A node that cannot be asked (`ChainUnavailable`) is not a misconfiguration: callers wait
as before. A passed check is remembered on the oracle for `CHAIN_IDENTITY_RECHECK_S`.
Gauge: `payflow_chain_node_problem{chain}` (1 while the check fails; rule
`PayflowChainNodeProblem`).
"""

from __future__ import annotations

import time

import asyncpg
import structlog
from prometheus_client import Gauge

from payflow.chain.config import ETH_MAINNET, PolicyKind, chain_configs
from payflow.chain.finality import FinalityOracle
from payflow.chain.rpc import RpcError, hex_int
from payflow.config import ChainSettings
from payflow.errors import PayflowError
from payflow.metrics import REGISTRY

log = structlog.get_logger("payflow.chain.identity")

NODE_PROBLEM = Gauge(
    "payflow_chain_node_problem",
    "1 while the chain's node is on another network or lacks what the policy needs",
    ("chain",),
    registry=REGISTRY,
)


class NodeMisconfigured(PayflowError):
    """The chain's node belongs to another network, or lacks a capability the chain's
    policy needs. Not retryable: an operator must change the setting or the node.
    `str(error)` is one line saying what to change."""

    def __init__(self, chain: str, line: str) -> None:
        super().__init__(f"chain {chain}: {line}")
        self.chain = chain


def alert_key(chain: str) -> str:
    """The alert raised while `chain` fails its node check."""
    return f"chain.node:{chain}"


def _setting(chain: str) -> str:
    return "ETH_CHAIN_ID" if chain == ETH_MAINNET else f"EVM_CHAINS.{chain}.chain_id"


def _policy_setting(chain: str) -> str:
    return "ETH_CONFIRMATION_POLICY" if chain == ETH_MAINNET else f"EVM_CHAINS.{chain}.policy"


async def stored_chain_id(pool: asyncpg.Pool, chain: str) -> int | None:
    """The `chains` row's chain id (None: no row, or none recorded)."""
    value = await pool.fetchval("SELECT chain_id FROM chains WHERE chain = $1", chain)
    return None if value is None else int(value)


async def expected_chain_id(pool: asyncpg.Pool, settings: ChainSettings, chain: str) -> int:
    """The chain id `chain` must have: its setting, which the `chains` row (when it
    records one) must equal. Raises `NodeMisconfigured` when they differ."""
    config = chain_configs(settings).get(chain)
    stored = await stored_chain_id(pool, chain)
    if config is None:
        if stored is None:
            raise NodeMisconfigured(chain, "no chain id is configured or recorded")
        return stored
    if stored is not None and stored != config.chain_id:
        raise NodeMisconfigured(
            chain,
            f"{_setting(chain)} is {config.chain_id} but the chains table records chain id"
            f" {stored}: chain work stopped (point the setting and the RPC at the same network)",
        )
    return config.chain_id


def _shown(value: object) -> str:
    """A node's answer as it goes into a line: at most about 40 characters."""
    if isinstance(value, int) and value.bit_length() > 128:
        # a decimal of a huge int is both unreadable and refused past 4,300 digits
        return f"{hex(value)[:20]}… ({value.bit_length()} bits)"
    text = "null" if value is None else str(value) if isinstance(value, int) else repr(value)
    return text if len(text) <= 40 else f"{text[:24]}… ({len(text)} characters)"


def mismatch_line(chain: str, expected: int, answered: int) -> str:
    """The one line for a node on another network."""
    return (
        f"the configured RPC answers eth_chainId {_shown(answered)}, expected {expected}"
        f" ({_setting(chain)}): it belongs to another network; chain work stopped"
    )


def answered_chain_id(chain: str, raw: object) -> int:
    """The chain id in a node's `eth_chainId` result `raw` (a hex quantity). Raises
    `NodeMisconfigured` naming what the node sent when it is none (null, a JSON number,
    garbage): a node that cannot say which network it is gets nothing signed or credited."""
    try:
        answered = hex_int(raw) if isinstance(raw, str) else None
    except ValueError:
        answered = None
    if answered is None:
        raise NodeMisconfigured(
            chain,
            f"the configured RPC answers eth_chainId with {_shown(raw)}, not a hex chain id:"
            " chain work stopped",
        )
    return answered


async def check_signing_chain(
    pool: asyncpg.Pool, settings: ChainSettings, chain: str, raw: object
) -> int:
    """Before a payout is signed for `chain`, with `raw` the node's `eth_chainId` result
    asked just now: the chain id to sign with. Raises `NodeMisconfigured` unless it is
    the chain's expected id (so a transaction is never signed for another network, even
    when the endpoint behind the RPC URL changed since the last signing)."""
    expected = await expected_chain_id(pool, settings, chain)
    try:
        answered = answered_chain_id(chain, raw)
        if answered != expected:
            raise NodeMisconfigured(chain, mismatch_line(chain, expected, answered))
    except NodeMisconfigured:
        NODE_PROBLEM.labels(chain).set(1)
        raise
    return answered


async def check_node(
    pool: asyncpg.Pool, oracle: FinalityOracle, chain: str, *, force: bool = False
) -> None:
    """Check `chain`'s node (cached on `oracle` for `CHAIN_IDENTITY_RECHECK_S` unless
    `force`): its `eth_chainId` is the expected id, and under the `finalized` policy it
    knows the `finalized` tag. Raises `NodeMisconfigured` (one line) or
    `ChainUnavailable` (the node cannot be asked: wait)."""
    checked = oracle.node_checked.get(chain)
    if not force and checked is not None and time.monotonic() < checked:
        return
    try:
        await _check(pool, oracle, chain)
    except NodeMisconfigured as error:
        NODE_PROBLEM.labels(chain).set(1)
        oracle.node_checked.pop(chain, None)
        log.error("payflow.chain.node_misconfigured", chain=chain, problem=str(error))
        raise
    NODE_PROBLEM.labels(chain).set(0)
    oracle.node_checked[chain] = time.monotonic() + oracle.settings.chain_identity_recheck_s


async def _check(pool: asyncpg.Pool, oracle: FinalityOracle, chain: str) -> None:
    config = oracle.config(chain)
    expected = await expected_chain_id(pool, oracle.settings, chain)
    try:
        raw = await oracle.call(chain, lambda rpc: rpc.call("eth_chainId"))
    except RpcError as error:
        raise NodeMisconfigured(
            chain, f"the configured RPC does not answer eth_chainId ({error.message[:80]})"
        ) from None
    answered = answered_chain_id(chain, raw)
    if answered != expected:
        raise NodeMisconfigured(chain, mismatch_line(chain, expected, answered))
    if config.policy.kind is PolicyKind.FINALIZED:
        try:
            await oracle.call(chain, lambda rpc: rpc.get_block("finalized"))
        except RpcError as error:
            raise NodeMisconfigured(
                chain,
                f"the node does not know the `finalized` block tag ({error.message[:80]}),"
                f" which the policy `finalized` needs: set {_policy_setting(chain)} to"
                " confirmations:N (e.g. confirmations:64); deposits wait until then",
            ) from None
