"""Chain truth (above the ledger): chains as data, JSON-RPC, finality, deposit reports
and their lifecycle, reconciliation, the scanner, payouts; its jobs (`JOBS`).

The names other packages use; import them from here or from their module."""

from payflow.chain.addresses import checked_evm_address
from payflow.chain.breaker import REDIS_ERRORS, Breaker, BreakerState
from payflow.chain.config import chain_configs
from payflow.chain.deposits import (
    ObserveOutcome,
    ObserveResult,
    observe,
    pending_incoming,
    recheck_transaction,
)
from payflow.chain.finality import FinalityOracle
from payflow.chain.jobs import JOBS
from payflow.chain.payouts.actions import action_cli, stalled_cli
from payflow.chain.payouts.actions_settle import OUTCOMES, settle_cli
from payflow.chain.payouts.holds import (
    PayoutKeyReused,
    PayoutRefused,
    payout_by_key,
    payout_scoped,
    place_payout,
)
from payflow.chain.payouts.records import PayoutAction, fee_event_id, withdrawal_event_id
from payflow.chain.payouts.wallet import stalled_counts, wallet_status_cli
from payflow.chain.recon_cli import run_chain_recon
from payflow.chain.rpc import RpcClient, RpcError
from payflow.chain.transfers import NATIVE_POSITION, TX_HASH_RE, Transfer
from payflow.chain.watch.cli import scan_once
from payflow.chain.watch.derivation import (
    XpubInvalid,
    allocate_address,
    chain_carries_asset,
    derived_by_key,
)
from payflow.chain.watch.role import run_scanner

__all__ = [
    "JOBS",
    "NATIVE_POSITION",
    "OUTCOMES",
    "REDIS_ERRORS",
    "TX_HASH_RE",
    "Breaker",
    "BreakerState",
    "FinalityOracle",
    "ObserveOutcome",
    "ObserveResult",
    "PayoutAction",
    "PayoutKeyReused",
    "PayoutRefused",
    "RpcClient",
    "RpcError",
    "Transfer",
    "XpubInvalid",
    "action_cli",
    "allocate_address",
    "chain_carries_asset",
    "chain_configs",
    "checked_evm_address",
    "derived_by_key",
    "fee_event_id",
    "observe",
    "payout_by_key",
    "payout_scoped",
    "pending_incoming",
    "place_payout",
    "recheck_transaction",
    "run_chain_recon",
    "run_scanner",
    "scan_once",
    "settle_cli",
    "stalled_cli",
    "stalled_counts",
    "wallet_status_cli",
    "withdrawal_event_id",
]
