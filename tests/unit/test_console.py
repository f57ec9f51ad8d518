"""Console helpers without a server: the activity chart, amount rendering, CSRF compare."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from payflow.console import chart
from payflow.console.sessions import tokens_match
from payflow.console.web import amount


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
    from payflow.console.pages import _extras

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
