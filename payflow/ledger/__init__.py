"""The ledger (lowest domain): accounts and payment events, exactly-once posting, the
event state machine, per-asset limits, reconciliation, the ledger worker, retention of
posting claims (`JOBS`), its DLQ replayer and its hook on the outbox relay.

The names other packages use; import them from here or from their module."""

from payflow.ledger.accounts import (
    asset_scale,
    ledger_entries,
    record_and_announce,
    record_event,
    set_account_status,
    store_event,
)
from payflow.ledger.announce import ON_PUBLISHED
from payflow.ledger.books import SystemAccount, chart_of_accounts, customer_totals
from payflow.ledger.jobs import JOBS
from payflow.ledger.limits import (
    AssetLimits,
    LimitExceeded,
    LimitKind,
    all_limits,
    check_limit,
    limits_from_row,
    set_limits,
)
from payflow.ledger.posting import (
    post_event,
    post_held_credit,
    post_within,
    posting_key,
    success_path_args,
)
from payflow.ledger.recon import ReconReport, reconcile
from payflow.ledger.records import AccountStatus, EventType, Outcome
from payflow.ledger.replay import replay_event
from payflow.ledger.withdrawals import (
    WITHDRAWAL_SCOPE,
    PlacePayout,
    WithdrawalRequest,
    replay_withdrawal,
    request_withdrawal,
)
from payflow.ledger.worker import EVENT_DEAD_LETTERER, LedgerWorker, dead_letter_event

__all__ = [
    "EVENT_DEAD_LETTERER",
    "JOBS",
    "ON_PUBLISHED",
    "WITHDRAWAL_SCOPE",
    "AccountStatus",
    "AssetLimits",
    "EventType",
    "LedgerWorker",
    "LimitExceeded",
    "LimitKind",
    "Outcome",
    "PlacePayout",
    "ReconReport",
    "SystemAccount",
    "WithdrawalRequest",
    "all_limits",
    "asset_scale",
    "chart_of_accounts",
    "check_limit",
    "customer_totals",
    "dead_letter_event",
    "ledger_entries",
    "limits_from_row",
    "post_event",
    "post_held_credit",
    "post_within",
    "posting_key",
    "reconcile",
    "record_and_announce",
    "record_event",
    "replay_event",
    "replay_withdrawal",
    "request_withdrawal",
    "set_account_status",
    "set_limits",
    "store_event",
    "success_path_args",
]
