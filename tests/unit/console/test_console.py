"""Console helpers without a server: the activity chart, amount rendering, CSRF compare,
and the chain pages' confirmations, filters, policies and payout timeline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from payflow.config import load_settings
from payflow.console import chart
from payflow.console.chain_pages import (
    DEPOSIT_FILTERS,
    _pick,
    confirmations,
    payout_steps,
    policies,
)
from payflow.console.sessions import tokens_match
from payflow.console.web import ConsoleError, amount


def test_chart_buckets_rows_by_minute_and_drops_rows_outside_the_hour() -> None:
    now = datetime(2026, 11, 30, 12, 30, 45, tzinfo=UTC)
    start = chart.window_start(now)
    assert start == datetime(2026, 11, 30, 11, 31, tzinfo=UTC)
    rows = [
        {"series": "payments", "minute": start, "n": 2},
        {"series": "payments", "minute": now.replace(second=0), "n": 3},
        {"series": "payments_failed", "minute": start + timedelta(minutes=5), "n": 1},
        {"series": "payments", "minute": start - timedelta(minutes=1), "n": 9},  # too old
    ]
    series = chart.bucket(rows, start)
    assert series["payments"][0] == 2
    assert series["payments"][59] == 3
    assert series["payments_failed"][5] == 1
    assert chart.totals(series) == {"payments": 5, "payments_failed": 1}


def test_chart_is_one_svg_with_a_titled_bar_per_count_and_no_script() -> None:
    start = datetime(2026, 11, 30, 11, 31, tzinfo=UTC)
    series = {"deposits": [0] * 59 + [4], "deposits_confirmed": [0] * 59 + [3]}
    svg = str(chart.render(series, start))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "<title>12:30: 4 created</title>" in svg
    assert "<title>12:30: 3 confirmed</title>" in svg
    assert "deposits per minute (created 4, confirmed 3, failed 0)" in svg
    assert "<script" not in svg and "style=" not in svg  # nothing the CSP would block


def test_amounts_render_at_their_asset_scale_exactly() -> None:
    assert amount(Decimal("12.5"), 2) == "12.50"
    assert amount(Decimal("0.000000000000000001"), 18) == "0.000000000000000001"
    assert amount(Decimal("1E+10"), 6) == "10000000000.000000"
    assert amount(None, 2) == "-"


def test_csrf_tokens_compare_exactly() -> None:
    assert tokens_match("abc" * 11, "abc" * 11)
    assert not tokens_match("abc" * 11, "abd" * 11)
    assert not tokens_match("abc" * 11, None)
    assert not tokens_match("abc" * 11, "")


def test_account_amount_columns_added_by_other_issues_are_shown_whatever_their_name() -> None:
    from payflow.console.money_pages import _extras

    row = {
        "id": "a",
        "asset": "USDC",
        "balance": Decimal("1.000000"),
        "initial_balance": Decimal(0),
        "pending_incoming": Decimal("2.5"),
        "held": Decimal("0.25"),
        "status": "active",
    }
    assert _extras(row) == {"pending_incoming": Decimal("2.5"), "held": Decimal("0.25")}


def test_confirmations_are_a_lower_bound_from_the_scanner_cursor() -> None:
    assert confirmations(100, 110) == 11
    assert confirmations(100, 100) == 1
    assert confirmations(100, 99) is None  # the cursor moved back (a reorg walk)
    assert confirmations(100, None) is None  # no scanner on that chain


def test_filters_refuse_anything_but_their_values() -> None:
    assert _pick(None, DEPOSIT_FILTERS, "verified") == "verified"
    assert _pick("all", DEPOSIT_FILTERS, "verified") == "all"
    with pytest.raises(ConsoleError) as refused:
        _pick("<b>", DEPOSIT_FILTERS, "verified")
    assert refused.value.status == 400


def test_chain_policies_come_from_settings_and_a_chain_without_rpc_has_none() -> None:
    base = {"database_url": "postgresql://x@127.0.0.1/x", "provider_webhook_secret": "s" * 40}
    assert policies(load_settings(**base, eth_rpc_url=None, evm_chains={})) == {}
    configured = load_settings(
        **base,
        eth_rpc_url="http://127.0.0.1:8545",
        eth_confirmation_policy="confirmations:12",
        evm_chains={"BASE": {"rpc_url": "http://127.0.0.1:8546", "chain_id": 8453}},
    )
    assert policies(configured) == {"ETH_MAINNET": "confirmations:12", "BASE": "finalized"}


def test_a_payout_timeline_runs_from_the_hold_to_its_postings_in_time_order() -> None:
    t0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    at = [t0 + timedelta(seconds=s) for s in range(10)]
    payout = {
        "scale": 18,
        "asset": "ETH",
        "amount": Decimal("1"),
        "fee_hold": Decimal("0.0021"),
        "fee_paid": Decimal("0.000042"),
        "status": "confirmed",
        "wait_reason": None,
        "nonce": 7,
        "hot_wallet": "0xabc",
        "landed_tx_hash": "0x02",
        "failure": None,
        "created_at": at[0],
        "updated_at": at[8],
        "signed_at": at[1],
        "sent_at": at[3],
        "finalized_at": at[6],
    }
    attempts = [
        {"attempt": 1, "tx_hash": "0x01", "created_at": at[1], "broadcast_at": at[2]},
        {"attempt": 2, "tx_hash": "0x02", "created_at": at[4], "broadcast_at": at[5]},
    ]
    postings = [
        {"event_id": "po:x", "event_type": "withdrawal", "posted_at": at[6]},
        {"event_id": "pofee:x", "event_type": "withdrawal_fee", "posted_at": None},
    ]
    steps = payout_steps(payout, attempts, postings)
    assert [what for _, what, _ in steps] == [
        "held",
        "signed",
        "attempt 1 broadcast",
        "sent",
        "fee bump: attempt 2",
        "attempt 2 broadcast",
        "confirmed",
        "posted: withdrawal",
    ]
    assert steps[0][2] == "1.002100000000000000 ETH (amount + fee at most)"
    assert steps[1][2] == "nonce 7 of 0xabc"
    assert steps[6][2] == "0x02 final; fee paid 0.000042000000000000"
