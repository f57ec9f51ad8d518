"""The console's books page (the trial balance per asset, admin only) and both sides of
every movement on the account and event pages, on real PostgreSQL."""

from __future__ import annotations

import re
import uuid
from decimal import Decimal
from urllib.parse import quote

import httpx
from fastapi import FastAPI

from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account, store_event
from payflow.ledger.posting import post_event
from payflow.ledger.records import EventType
from tests.integration.ledger.helpers import post_opening

from .conftest import BASE, Merchants, signed_in


async def shop_account_with_a_deposit(app: FastAPI, merchants: Merchants) -> tuple[str, str]:
    """A shop's USDC account credited 1.5 by a ledger-only deposit; (account id, event id)."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as api:
        created = await api.post(
            "/api/v1/accounts", json={"asset": "USDC"}, headers={"X-API-Key": merchants.shop}
        )
    assert created.status_code == 201, created.text
    account_id = created.json()["account_id"]
    event_id = f"dep-{uuid.uuid4().hex}"
    pool, settings = app.state.api.pool, app.state.api.settings
    async with pool.acquire() as conn, transaction(conn, settings):
        await store_event(
            conn,
            event_id=event_id,
            account_id=uuid.UUID(account_id),
            amount=Decimal("1.5"),
            event_type=EventType.DEPOSIT,
        )
    await post_event(pool, settings, event_id)
    return account_id, event_id


def section(html: str, asset: str) -> str:
    found = re.search(
        rf'<section class="card (ok|bad)" id="books-{asset}">(.*?)</section>', html, re.S
    )
    assert found is not None, html
    return found.group(0)


def fact(block: str, name: str) -> str:
    found = re.search(rf'<dd class="{name}[^"]*">([^<(]+)', block)
    assert found is not None, block
    return found.group(1).strip()


def system_balance(block: str, code: str) -> str:
    found = re.search(
        rf"<tr><td><code>{re.escape(code)}</code></td><td>\w+</td><td>(\w+)</td>"
        r'<td class="num">([^<]+)</td>',
        block,
    )
    assert found is not None, (code, block)
    return f"{found.group(1)} {found.group(2)}"


async def test_admin_sees_the_trial_balance_per_asset(
    console_app: FastAPI, merchants: Merchants
) -> None:
    pool, settings = console_app.state.api.pool, console_app.state.api.settings
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "USDC")
    await post_opening(settings, account.id, Decimal("7.25"))  # the operator's act
    await shop_account_with_a_deposit(console_app, merchants)
    async with signed_in(console_app, merchants.admin) as ops:
        answer = await ops.get("/console/books")
        assert answer.status_code == 200
        assert '<a href="/console/books">Books</a>' in answer.text  # in the admin's menu
    usdc = section(answer.text, "USDC")
    assert 'class="card ok"' in usdc
    assert fact(usdc, "debits") == fact(usdc, "credits") == "8.750000"
    assert fact(usdc, "difference") == "0.000000"
    # Each system account on its normal side: the opening and custody accounts are
    # debit-normal assets of payflow, positive when it holds the money.
    assert system_balance(usdc, "opening:USDC") == "debit 7.250000"
    assert system_balance(usdc, "custody:external:USDC") == "debit 1.500000"
    assert system_balance(usdc, "fees:USDC") == "credit 0.000000"
    assert "8.750000 over 2 accounts" in usdc  # owed to customers
    # Every configured asset has its section, balanced at zero when untouched.
    eth = section(answer.text, "ETH")
    assert fact(eth, "debits") == fact(eth, "difference") == "0.000000000000000000"


async def test_a_merchant_gets_404_for_the_books(
    console_app: FastAPI, merchants: Merchants
) -> None:
    async with signed_in(console_app, merchants.shop) as shop:
        answer = await shop.get("/console/books")
        assert answer.status_code == 404
        assert "USDC" not in answer.text
        menu = await shop.get("/console")
        assert "/console/books" not in menu.text
    transport = httpx.ASGITransport(app=console_app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as anonymous:
        answer = await anonymous.get("/console/books")
        assert (answer.status_code, answer.headers["location"]) == (303, "/console/signin")


async def test_account_and_event_pages_show_both_sides(
    console_app: FastAPI, merchants: Merchants
) -> None:
    account_id, event_id = await shop_account_with_a_deposit(console_app, merchants)
    async with signed_in(console_app, merchants.shop) as shop:
        account = await shop.get(f"/console/accounts/{account_id}")
        assert account.status_code == 200
        other = re.search(r'<td class="counterparty">(.*?)</td>', account.text, re.S)
        assert other is not None, account.text
        assert "<code>custody:external:USDC</code> (custody) -1.500000" in other.group(1)
        event = await shop.get(f"/console/events/{quote(event_id)}")
        assert event.status_code == 200
        customer = re.search(r'<tr class="leg-customer">(.*?)</tr>', event.text, re.S)
        counter = re.search(r'<tr class="leg-counterparty">(.*?)</tr>', event.text, re.S)
        assert customer is not None and counter is not None, event.text
        assert account_id in customer.group(1) and "1.500000" in customer.group(1)
        assert "custody:external:USDC" in counter.group(1)
        assert "-1.500000" in counter.group(1)


async def test_the_account_page_lists_its_opening_transfer_with_the_other_side(
    console_app: FastAPI, merchants: Merchants
) -> None:
    account_id, _ = await shop_account_with_a_deposit(console_app, merchants)
    settings = console_app.state.api.settings
    await post_opening(settings, uuid.UUID(account_id), Decimal("7.25"))  # the operator's act
    async with signed_in(console_app, merchants.shop) as shop:
        page = await shop.get(f"/console/accounts/{account_id}")
    assert page.status_code == 200
    table = re.search(r'<table class="transfers">(.*?)</table>', page.text, re.S)
    assert table is not None, page.text
    [row] = re.findall(r"<tr><td>.*?</tr>", table.group(1), re.S)
    assert "<td>opening</td>" in row and f"<code>{account_id}</code>" in row
    assert "<code>opening:USDC</code> (opening)" in row and "7.250000" in row
