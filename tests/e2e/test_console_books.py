"""The books page in a real browser: Debian's chromium driven by Playwright against
`payflow up` as an OS process (the fixtures of `test_console`). An admin reaches the trial
balance from the menu; a merchant gets the unknown-page 404."""

from __future__ import annotations

from decimal import Decimal

import asyncpg
from playwright.async_api import Browser

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account
from tests.e2e.test_console import (  # noqa: F401 - fixtures by name
    Console,
    Keys,
    browser,
    console,
    keys,
    pytestmark,
    shot,
    sign_in,
)
from tests.integration.ledger.helpers import post_opening


async def test_admin_reads_the_trial_balance_and_a_merchant_cannot(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    keys: Keys,  # noqa: F811 - the fixture
    console: Console,  # noqa: F811 - the fixture
    browser: Browser,  # noqa: F811 - the fixture
) -> None:
    async with pool.acquire() as conn, transaction(conn, pipe_settings):
        account = await create_account(conn, "USDC")
    await post_opening(pipe_settings, account.id, Decimal("3.5"))  # the operator's act

    page = await browser.new_page()
    await sign_in(page, console, keys.admin)
    await page.click("nav >> text=Books")
    await page.wait_for_url(f"{console.base}/console/books")
    assert await page.text_content("h1") == "Books: trial balance"
    usdc = page.locator("#books-USDC")
    assert "ok" in (await usdc.get_attribute("class") or "")
    assert (await usdc.locator("dd.difference").text_content() or "").strip() == "0.000000"
    assert (await usdc.locator("dd.debits").text_content() or "").strip() == "3.500000"
    row = usdc.locator("tr", has_text="opening:USDC")
    assert "3.500000" in (await row.text_content() or "")
    await shot(page, console, "books")
    await page.close()

    shop = await browser.new_page()
    await sign_in(shop, console, keys.shop)
    assert await shop.locator("nav >> text=Books").count() == 0
    response = await shop.goto(f"{console.base}/console/books")
    assert response is not None and response.status == 404
    assert "There is no such page." in (await shop.content())
    await shop.close()
