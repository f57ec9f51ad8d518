"""History through the HTTP API on real PostgreSQL: an account's balance at an instant
(`GET /api/v1/accounts/{id}?at=`) and its statement for a period (JSON and CSV), both
summed from the double-entry journal."""

from __future__ import annotations

import csv
import io
import itertools
import uuid
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import httpx
import pytest

from payflow.api.routes import statements
from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account, store_event
from payflow.ledger.posting import post_event
from payflow.ledger.records import EventType
from tests.integration.ledger.helpers import post_opening

from .test_accounts import _account, _deposit, key

MICRO = timedelta(microseconds=1)


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def balance_at(client: httpx.AsyncClient, account_id: str, at: datetime | str) -> str:
    value = at if isinstance(at, str) else stamp(at)
    response = await client.get(f"/api/v1/accounts/{account_id}", params={"at": value})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"account_id", "asset", "at", "balance"}
    balance: str = body["balance"]
    return balance


async def entries(client: httpx.AsyncClient, account_id: str) -> list[dict[str, Any]]:
    """The account's ledger entries, oldest first."""
    response = await client.get(f"/api/v1/accounts/{account_id}/entries")
    items: list[dict[str, Any]] = response.json()["items"]
    return items[::-1]


async def funded_account(
    app: Any, client: httpx.AsyncClient, anon: httpx.AsyncClient, admin: httpx.AsyncClient
) -> tuple[str, datetime]:
    """An account with deposits of 10 and 2.5 USDC and a withdrawal of 4 (posted), and
    the account's creation time."""
    account_id = await _account(client)
    created = parse((await client.get(f"/api/v1/accounts/{account_id}")).json()["created_at"])
    await _deposit(app, anon, admin, account_id, "10")
    await _deposit(app, anon, admin, account_id, "2.5")
    response = await client.post(
        f"/api/v1/accounts/{account_id}/withdrawals", json={"amount": "4"}, headers=key()
    )
    assert response.status_code == 202, response.text
    await post_event(app.state.api.pool, app.state.api.settings, response.json()["event_id"])
    return account_id, created


async def test_balance_at_instants_around_each_posting(
    app: Any, client: httpx.AsyncClient, anon: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    account_id, created = await funded_account(app, client, anon, admin)
    posted = await entries(client, account_id)
    assert [e["balance_after"] for e in posted] == ["10.000000", "12.500000", "8.500000"]
    assert await balance_at(client, account_id, created - timedelta(days=1)) == "0.000000"
    before = "0.000000"
    for entry in posted:
        at = parse(entry["created_at"])
        # A leg counts from its own instant on (created_at <= at), not a microsecond earlier.
        assert await balance_at(client, account_id, at - MICRO) == before
        assert await balance_at(client, account_id, at) == entry["balance_after"]
        assert await balance_at(client, account_id, at + MICRO) == entry["balance_after"]
        before = entry["balance_after"]
    # Any offset reads the same instant; the answer names it in UTC.
    last = parse(posted[-1]["created_at"]).astimezone(timezone(timedelta(hours=3)))
    response = await client.get(f"/api/v1/accounts/{account_id}", params={"at": last.isoformat()})
    assert response.json()["balance"] == "8.500000"
    assert response.json()["at"] == posted[-1]["created_at"]
    now = (await client.get(f"/api/v1/accounts/{account_id}")).json()
    assert await balance_at(client, account_id, datetime.now(UTC)) == now["balance"]


def movement_sum(opening: str, movements: list[dict[str, Any]]) -> Decimal:
    return Decimal(opening) + sum((Decimal(m["amount"]) for m in movements), Decimal(0))


async def test_statement_opening_movements_and_closing_agree(
    app: Any, client: httpx.AsyncClient, anon: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    account_id, created = await funded_account(app, client, anon, admin)
    posted = await entries(client, account_id)
    response = await client.get(
        f"/api/v1/accounts/{account_id}/statement", params={"from": stamp(created - MICRO)}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["opening_balance"] == "0.000000"
    assert body["closing_balance"] == "8.500000"
    assert Decimal(body["closing_balance"]) == movement_sum("0", body["movements"])
    moves = body["movements"]
    assert [m["amount"] for m in moves] == ["10.000000", "2.500000", "-4.000000"]
    assert [m["balance_after"] for m in moves] == ["10.000000", "12.500000", "8.500000"]
    assert [m["kind"] for m in moves] == ["deposit", "deposit", "withdrawal"]
    assert [m["reference"] for m in moves] == [e["event_id"] for e in posted]
    assert [m["at"] for m in moves] == [e["created_at"] for e in posted]
    # Chain deposits come from the chain's custody account; a ledger-only withdrawal goes
    # to the external custody account.
    assert [(m["counterparty"], m["counterparty_kind"]) for m in moves] == [
        ("custody:ETH_MAINNET:USDC", "custody"),
        ("custody:ETH_MAINNET:USDC", "custody"),
        ("custody:external:USDC", "custody"),
    ]

    # A period from the first deposit's instant (exclusive) to the second's (inclusive).
    first, second = parse(posted[0]["created_at"]), parse(posted[1]["created_at"])
    part = (
        await client.get(
            f"/api/v1/accounts/{account_id}/statement",
            params={"from": stamp(first), "to": stamp(second)},
        )
    ).json()
    assert (part["opening_balance"], part["closing_balance"]) == ("10.000000", "12.500000")
    assert [m["reference"] for m in part["movements"]] == [posted[1]["event_id"]]
    assert Decimal(part["closing_balance"]) == movement_sum(
        part["opening_balance"], part["movements"]
    )
    # Split anywhere, the parts chain: each closing is the next opening, and each agrees
    # with the balance at that instant.
    cuts = [created - MICRO, first - MICRO, second, datetime.now(UTC)]
    previous_closing = "0.000000"
    for start, end in itertools.pairwise(cuts):
        piece = (
            await client.get(
                f"/api/v1/accounts/{account_id}/statement",
                params={"from": stamp(start), "to": stamp(end)},
            )
        ).json()
        assert piece["opening_balance"] == previous_closing
        assert piece["opening_balance"] == await balance_at(client, account_id, start)
        assert piece["closing_balance"] == await balance_at(client, account_id, end)
        assert Decimal(piece["closing_balance"]) == movement_sum(
            piece["opening_balance"], piece["movements"]
        )
        previous_closing = piece["closing_balance"]
    assert previous_closing == "8.500000"


async def test_an_opening_transfer_shows_with_its_opening_account(
    app: Any, admin: httpx.AsyncClient
) -> None:
    pool, settings = app.state.api.pool, app.state.api.settings
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "USDC")
    # an opening balance is the operator's act, posted as the migration login
    await post_opening(settings, account.id, Decimal("7.25"))
    body = (
        await admin.get(
            f"/api/v1/accounts/{account.id}/statement",
            params={"from": stamp(datetime.now(UTC) - timedelta(hours=1))},
        )
    ).json()
    [opening] = body["movements"]
    assert (opening["kind"], opening["amount"], opening["reference"]) == (
        "opening",
        "7.250000",
        str(account.id),
    )
    assert (opening["counterparty"], opening["counterparty_kind"]) == ("opening:USDC", "opening")
    assert (body["opening_balance"], body["closing_balance"]) == ("0.000000", "7.250000")


async def test_statement_as_csv(
    app: Any, client: httpx.AsyncClient, anon: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    account_id, created = await funded_account(app, client, anon, admin)
    response = await client.get(
        f"/api/v1/accounts/{account_id}/statement",
        params={"from": stamp(created - MICRO)},
        headers={"Accept": "text/csv"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    assert "attachment" in response.headers["content-disposition"]
    assert "Accept" in response.headers["vary"]
    assert response.text.endswith("\r\n")  # RFC 4180 line ends
    rows = list(csv.DictReader(io.StringIO(response.text, newline="")))
    assert list(rows[0]) == list(statements.CSV_HEADER)
    opening, *moves, closing = rows
    assert (opening["kind"], opening["amount"], opening["balance_after"]) == (
        "opening_balance",
        "",
        "0.000000",
    )
    assert (closing["kind"], closing["balance_after"]) == ("closing_balance", "8.500000")
    assert [m["amount"] for m in moves] == ["10.000000", "2.500000", "-4.000000"]
    assert [m["counterparty"] for m in moves] == [
        "custody:ETH_MAINNET:USDC",
        "custody:ETH_MAINNET:USDC",
        "custody:external:USDC",
    ]
    assert Decimal(closing["balance_after"]) == movement_sum(opening["balance_after"], moves)
    # The same statement as JSON (a JSON Accept wins a tie; no Accept is JSON).
    as_json = await client.get(
        f"/api/v1/accounts/{account_id}/statement",
        params={"from": stamp(created - MICRO), "to": closing["at"]},
        headers={"Accept": "application/json, text/csv"},
    )
    assert [m["reference"] for m in as_json.json()["movements"]] == [m["reference"] for m in moves]


@pytest.mark.parametrize("reference", ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)"])
async def test_csv_cells_never_start_a_formula(
    app: Any, admin: httpx.AsyncClient, reference: str
) -> None:
    """A reference (an event id a provider chose) that a spreadsheet would run as a
    formula is written with a leading apostrophe; a comma and a quote in it are quoted."""
    pool, settings = app.state.api.pool, app.state.api.settings
    event_id = f'{reference},"{uuid.uuid4().hex[:6]}"'
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "USDC")
        await store_event(
            conn,
            event_id=event_id,
            account_id=account.id,
            amount=Decimal("1.5"),
            event_type=EventType.DEPOSIT,
        )
    await post_event(pool, settings, event_id)
    response = await admin.get(
        f"/api/v1/accounts/{account.id}/statement",
        params={"from": stamp(datetime.now(UTC) - timedelta(hours=1))},
        headers={"Accept": "text/csv"},
    )
    quoted = "\"'" + event_id.replace('"', '""') + '"\r\n'  # RFC 4180: quoted, quotes doubled
    assert quoted in response.text
    [row] = [r for r in csv.DictReader(io.StringIO(response.text, newline="")) if r["amount"]]
    assert row["reference"] == "'" + event_id
    assert row["amount"] == "1.500000"  # amounts are never prefixed
    assert row["counterparty"] == "custody:external:USDC"
    # JSON carries the reference unchanged.
    body = (
        await admin.get(
            f"/api/v1/accounts/{account.id}/statement",
            params={"from": stamp(datetime.now(UTC) - timedelta(hours=1))},
        )
    ).json()
    assert body["movements"][0]["reference"] == event_id


async def test_another_merchants_account_is_404(
    client: httpx.AsyncClient, other: httpx.AsyncClient
) -> None:
    account_id = await _account(client)
    now = stamp(datetime.now(UTC))
    hidden = await other.get(f"/api/v1/accounts/{account_id}", params={"at": now})
    assert hidden.status_code == 404
    assert hidden.headers["content-type"].startswith("application/problem+json")
    statement = await other.get(f"/api/v1/accounts/{account_id}/statement", params={"from": now})
    assert statement.status_code == 404
    unknown = await client.get(f"/api/v1/accounts/{uuid.uuid4()}/statement", params={"from": now})
    assert unknown.status_code == 404


FUTURE = stamp(datetime.now(UTC) + timedelta(days=1))


@pytest.mark.parametrize(
    "at",
    [
        "yesterday",
        "0",
        "99999999999",
        "2026-01-01T00:00:00",  # no offset
        "2026-13-01T00:00:00Z",
        "1969-12-31T23:59:59Z",
        "",
        pytest.param(FUTURE, id="a-day-ahead"),
    ],
)
async def test_bad_at_is_422(client: httpx.AsyncClient, at: str) -> None:
    account_id = await _account(client)
    response = await client.get(f"/api/v1/accounts/{account_id}", params={"at": at})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize(
    "params",
    [
        {},  # `from` is required
        {"from": "last week"},
        {"from": "2026-01-01T00:00:00"},
        {"from": FUTURE},
        {"from": "2026-01-01T00:00:00Z", "to": FUTURE},
        {"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {"from": "2026-01-01T00:00:00Z", "to": "1 Jan"},
    ],
)
async def test_bad_period_is_422(client: httpx.AsyncClient, params: dict[str, str]) -> None:
    account_id = await _account(client)
    response = await client.get(f"/api/v1/accounts/{account_id}/statement", params=params)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")


async def test_a_period_with_too_many_movements_is_refused(
    app: Any,
    client: httpx.AsyncClient,
    anon: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    account_id, created = await funded_account(app, client, anon, admin)
    monkeypatch.setattr(statements, "STATEMENT_MAX_MOVEMENTS", 2)
    url = f"/api/v1/accounts/{account_id}/statement"
    refused = await client.get(url, params={"from": stamp(created - MICRO)})
    assert refused.status_code == 422
    assert "more than 2 movements" in refused.json()["errors"][0]["message"]
    posted = await entries(client, account_id)
    # Two movements fit.
    allowed = await client.get(url, params={"from": posted[0]["created_at"]})
    assert allowed.status_code == 200, allowed.text
    assert len(allowed.json()["movements"]) == 2
