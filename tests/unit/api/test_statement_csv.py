"""The statement's CSV rendering and content negotiation, without a database."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from payflow.api.routes.statements import safe_cell, statement_csv, wants_csv
from payflow.ledger.history import Movement, Statement


@pytest.mark.parametrize(
    ("accept", "csv_wanted"),
    [
        (None, False),
        ("", False),
        ("text/csv", True),
        ("TEXT/CSV; charset=utf-8", True),
        ("application/json", False),
        ("application/json, text/csv", False),  # a tie: JSON
        ("text/csv, application/json;q=0.5", True),
        ("text/csv;q=0.2, */*;q=0.8", False),
        ("text/csv;q=bad", False),
        ("text/html", False),
    ],
)
def test_wants_csv(accept: str | None, csv_wanted: bool) -> None:
    assert wants_csv(accept) is csv_wanted


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@A1", "\tx", "\rx"])
def test_a_formula_start_is_prefixed(text: str) -> None:
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize("text", ["deposit", "chain:0xab~1", "po:1b4e28ba", "a=b", ""])
def test_other_text_is_unchanged(text: str) -> None:
    assert safe_cell(text) == text
    assert safe_cell(None) == ""


def test_csv_rows_quote_per_rfc_4180() -> None:
    at = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
    movement = Movement(
        at=at,
        amount=Decimal("-2.5"),
        balance_after=Decimal("7.5"),
        kind="withdrawal",
        counterparty="custody:external:USDC",
        counterparty_kind="custody",
        reference='a,"b"\nc',
    )
    st = Statement(uuid.uuid4(), at, at, Decimal(10), Decimal("7.5"), [movement])
    text = statement_csv(st, "USDC")
    assert text.count("\r\n") == 4  # header, opening, one movement (its LF is quoted), closing
    assert '"a,""b""\nc"' in text
    header, opening, row, closing = list(csv.reader(io.StringIO(text, newline="")))
    assert header[:3] == ["at", "amount", "balance_after"]
    assert opening == [
        "2026-12-03T09:00:00.000000Z",
        "",
        "10.000000",
        "opening_balance",
        "",
        "",
        "",
    ]
    assert row[1:4] == ["-2.500000", "7.500000", "withdrawal"]  # the amount keeps its sign
    assert row[6] == 'a,"b"\nc'
    assert closing[2:4] == ["7.500000", "closing_balance"]
