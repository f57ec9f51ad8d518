"""The console in a real browser: Debian's chromium driven by Playwright, against
`payflow up` as an OS process on a free port (real PostgreSQL, RabbitMQ, Redis).

Screenshots of every page land in the test's tmp_path (`console-screens/`); set
CONSOLE_SCREENSHOT_DIR to also copy them elsewhere (the README's overview comes from a
run of this test).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote

import asyncpg
import httpx
import orjson
import pytest
from playwright.async_api import Browser, Page, async_playwright
from playwright.async_api import Error as PlaywrightError

from payflow.alerts import Severity
from payflow.alerts.store import AlertStore
from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.dlq.records import record_dead_letter
from payflow.ingress.signature import sign
from payflow.ledger.accounts import create_account
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.ports import free_port
from payflow_lab.supervisor import spawn_payflow
from tests.conftest import redis_prefix
from tests.integration.console.chain_world import SCRIPT, ChainWorld, seed_chain
from tests.integration.support import wait_until

ROOT = Path(__file__).resolve().parents[2]
PROVIDER_SECRET = "console-provider-secret-0123456789abcdef"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MAX_FAILURES = 3
LIMIT_S = 90.0

pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK), reason="needs Debian's chromium (make chromium)"
)


@dataclass(frozen=True, slots=True)
class Keys:
    admin: str
    shop: str
    shop_id: uuid.UUID
    other: str


@dataclass
class Console:
    """A running `payflow up` and where its screenshots go."""

    process: subprocess.Popen[bytes]
    base: str
    log_path: Path
    screens: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
async def keys(pool: asyncpg.Pool) -> Keys:
    async with pool.acquire() as conn:
        shop_id, shop, _ = await create_merchant(conn, "shop", admin=False)
        _, other, _ = await create_merchant(conn, "other-shop", admin=False)
        _, admin, _ = await create_merchant(conn, "ops", admin=True)
    return Keys(admin, shop, shop_id, other)


@pytest.fixture
async def console(pipe_settings: Settings, keys: Keys, tmp_path: Path) -> AsyncIterator[Console]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("API_KEY", "ADMIN_API_KEY")}
    env.update(
        DATABASE_URL=pipe_settings.database_url,
        RABBITMQ_URL=pipe_settings.rabbitmq_url,
        REDIS_URL=pipe_settings.redis_url,
        REDIS_KEY_PREFIX=redis_prefix("console"),
        API_HOST="127.0.0.1",
        API_PORT=str(port),
        PROVIDER_WEBHOOK_SECRET=PROVIDER_SECRET,
        WEBHOOK_ALLOW_HOSTS="127.0.0.1",
        GATEWAY_DELAY_MIN_S="0",
        GATEWAY_DELAY_MAX_S="0",
        GATEWAY_FAILURE_RATE="0",
        RETRY_TIERS_MS="200,400,800",
        RELAY_POLL_INTERVAL_S="0.5",
        SCHEDULER_INTERVAL_S="0.5",
        DB_POOL_MIN="1",
        DB_POOL_MAX="8",
        LOG_JSON="false",
        LOG_LEVEL="WARNING",
        CONSOLE_SIGNIN_MAX_FAILURES=str(MAX_FAILURES),
    )
    log_path = tmp_path / "up.log"
    process = spawn_payflow(["up"], env, log_path, cwd=ROOT)
    screens = tmp_path / "console-screens"
    screens.mkdir()
    running = Console(process, f"http://127.0.0.1:{port}", log_path, screens)
    try:
        async with httpx.AsyncClient(base_url=running.base, timeout=10) as client:

            async def healthy() -> bool:
                assert process.poll() is None, running.log()
                try:
                    response = await client.get("/health", headers={"X-API-Key": keys.shop})
                except httpx.TransportError:
                    return False
                return response.status_code == 200

            await wait_until(healthy, limit_s=LIMIT_S, what="GET /health to answer 200")
        yield running
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
        copy_to = os.environ.get("CONSOLE_SCREENSHOT_DIR")
        if copy_to:
            shutil.copytree(screens, copy_to, dirs_exist_ok=True)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            await launched.close()


async def sign_in(page: Page, console: Console, key: str) -> None:
    await page.goto(f"{console.base}/console/signin")
    await page.fill("#api_key", key)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{console.base}/console")


async def shot(page: Page, console: Console, name: str) -> None:
    """Save a screenshot of the page. Chromium sometimes fails a capture on a busy
    machine ("Unable to capture screenshot"); the picture is an artifact, not an
    assertion, so a failed capture is retried a few times."""
    path = str(console.screens / f"{name}.png")
    for attempt in range(3):
        try:
            await page.screenshot(path=path, full_page=True)
            return
        except PlaywrightError:
            if attempt == 2:
                raise
            await asyncio.sleep(1.0)


async def session_cookie(page: Page) -> str:
    cookies = await page.context.cookies()
    return next(c["value"] for c in cookies if c["name"] == "payflow_console")


async def test_admin_sees_payment_timeline_replays_dead_letter_and_signs_out(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    keys: Keys,
    sink: WebhookSink,
    console: Console,
    browser: Browser,
) -> None:
    # The merchant's endpoint fails the first POST, then accepts: two logged attempts.
    sink.status_for = lambda r: 500 if not sink.received else 200

    async with httpx.AsyncClient(base_url=console.base, timeout=10) as api:
        created = await api.post(
            "/api/v1/payments",
            json={"amount": "12.5", "currency": "RUB", "webhook_url": sink.url},
            headers={"X-API-Key": keys.shop, "Idempotency-Key": "console-1"},
        )
    assert created.status_code == 202, created.text
    payment_id = uuid.UUID(created.json()["payment_id"])
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        limit_s=LIMIT_S,
        what="the webhook to be delivered on the second attempt",
    )

    # A ledger event that died in the DLQ, and an unmatched provider event with a script.
    async with pool.acquire() as conn, transaction(conn, pipe_settings):
        account = await create_account(conn, "USDC")
        event_id = f"console-dead-{uuid.uuid4().hex[:8]}"
        await conn.execute(
            "INSERT INTO payment_events (event_id, account_id, amount, event_type, status)"
            " VALUES ($1, $2, 5, 'deposit', 'failed')",
            event_id,
            account.id,
        )
        dlq_id = await record_dead_letter(
            conn,
            source="payment_event",
            subject_id=event_id,
            payload={"version": 1, "event_id": event_id},
            error="RuntimeError: ledger worker crashed",
            attempt=4,
        )

    # A provider deposit to an address we never issued, carrying a script in its payload.
    script = "<script>document.title='pwned'</script>"
    body = orjson.dumps(
        {
            "event_id": "evil-1",
            "event_type": "deposit",
            "to_address": "0x" + "ab" * 20,
            "asset": "USDC",
            "amount": "1.5",
            "tx_hash": "0x" + "cd" * 32,
            "contract_address": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
            "memo": script,
        }
    )
    async with httpx.AsyncClient(base_url=console.base, timeout=10) as api:
        delivered = await api.post(
            "/api/v1/webhooks/provider",
            content=body,
            headers={
                pipe_settings.provider_signature_header: sign(body, PROVIDER_SECRET.encode()),
                "Content-Type": "application/json",
            },
        )
    assert delivered.status_code == 202, delivered.text
    unmatched_id = await pool.fetchval("SELECT event_id FROM unmatched_provider_events")
    assert unmatched_id is not None

    await AlertStore(pool, pipe_settings, database=pipe_settings).fire(
        "console.test", Severity.WARNING, "a test alert for the console", {}
    )

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await sign_in(page, console, keys.admin)
    await shot(page, console, "overview")
    assert await page.locator("#verdict").count() == 1  # the ops status is an admin's view

    # The payment is listed; its timeline shows every webhook attempt with its HTTP status.
    await page.goto(f"{console.base}/console/payments")
    await shot(page, console, "payments")
    filtered = await page.goto(f"{console.base}/console/payments?status=failed")
    assert filtered is not None and str(payment_id) not in await page.content()
    await page.goto(
        f"{console.base}/console/payments?status=succeeded&created_from=2000-01-01T00:00"
    )
    assert str(payment_id) in await page.content()
    bad = await page.goto(f"{console.base}/console/payments?status=lost")
    assert bad is not None and bad.status == 400
    assert "status must be one of" in await page.content()
    await page.goto(f"{console.base}/console/payments")
    await page.click(f"a[href='/console/payments/{payment_id}']")
    timeline = await page.locator("#timeline").inner_text()
    await shot(page, console, "payment")
    for step in ("created", "charged", "finalized", "credited"):
        assert step in timeline
    assert "webhook attempt 1 HTTP 500" in " ".join(timeline.split())
    assert "webhook attempt 2 HTTP 200" in " ".join(timeline.split())
    assert "12.50 RUB" in await page.content()  # at RUB's scale

    for name, path in (
        ("accounts", "/console/accounts"),
        ("account", f"/console/accounts/{account.id}"),
        ("events", "/console/events"),
        ("event", f"/console/events/{event_id}"),
        ("dlq", "/console/dlq"),
        ("unmatched", "/console/unmatched"),
        ("alerts", "/console/alerts"),
        ("jobs", "/console/jobs"),
    ):
        response = await page.goto(f"{console.base}{path}")
        assert response is not None and response.status == 200, path
        await shot(page, console, name)

    # Acknowledge the alert; run a job now (recorded like any run).
    await page.goto(f"{console.base}/console/alerts")
    await page.click("form[action='/console/alerts/ack'] button")
    await page.wait_for_url(f"{console.base}/console/alerts")
    assert "acknowledged by console:ops" in await page.content()
    assert (
        await pool.fetchval("SELECT acknowledged_by FROM alerts WHERE key = 'console.test'")
        == "console:ops"
    )
    runs = await pool.fetchval("SELECT count(*) FROM job_runs WHERE job = 'recon_hot'")
    await page.goto(f"{console.base}/console/jobs")
    await page.click("form[action='/console/jobs/recon_hot/run'] button")
    assert "recon_hot: ok" in await page.locator("#message").inner_text()
    assert await pool.fetchval("SELECT count(*) FROM job_runs WHERE job = 'recon_hot'") > runs

    # The chain pages: deposits awaiting finality, every deposit, one deposit with its
    # reports (a refuted one carries a script in text chosen outside), the reports to
    # review, payouts with the hot wallets, one payout's timeline with its fee bump.
    # (After the alert above: an open payout fires `payouts.unconfigured` in the running
    # scheduler, which has no hot wallet, and the first Acknowledge button must be ours.)
    world = await _chain_world(pool, pipe_settings, console, keys)
    for name, path in (
        ("deposits", "/console/deposits"),
        ("deposits_all", "/console/deposits?status=all"),
        ("deposit", f"/console/deposits/{quote(world.awaiting)}"),
        ("deposit_reports", "/console/deposits/reports"),
        ("payouts", "/console/payouts"),
        ("payout", f"/console/payouts/{world.confirmed_payout}"),
    ):
        response = await page.goto(f"{console.base}{path}")
        assert response is not None and response.status == 200, path
        await shot(page, console, name)
        assert await page.title() != "pwned"
        assert "<script>document" not in await page.content()
    assert "fee bump: attempt 2" in await page.locator("#timeline").inner_text()
    await page.goto(f"{console.base}/console/deposits/reports")
    assert SCRIPT in await page.locator("#reports").inner_text()
    await page.goto(f"{console.base}/console/payouts")
    assert world.wallet in await page.locator("#hot-wallets").inner_text()
    await page.goto(f"{console.base}/console")
    assert "Deposits awaiting finality" in await page.locator("#onchain").inner_text()

    # The raw payload is text: the script is shown, not run.
    await page.goto(f"{console.base}/console/unmatched/{unmatched_id}")
    await shot(page, console, "unmatched_one")
    assert script in await page.locator("#raw").inner_text()
    assert await page.title() != "pwned"
    assert "<script>document" not in await page.content()

    # A POST without the CSRF token is refused and changes nothing.
    cookie = await session_cookie(page)
    async with httpx.AsyncClient(base_url=console.base, cookies={"payflow_console": cookie}) as raw:
        forged = await raw.post(f"/console/dlq/{dlq_id}/replay", data={"reason": "forged"})
    assert forged.status_code == 403
    assert await pool.fetchval(
        "SELECT resolved_at IS NULL FROM dead_letter_queue WHERE id = $1", dlq_id
    )

    # Replay with a reason: resolved, audited, and the event is posted.
    await page.goto(f"{console.base}/console/dlq/{dlq_id}")
    await shot(page, console, "dlq_one")
    await page.fill("#reason", "worker fixed in 1.2.3")
    await page.click("form[action$='/replay'] button")
    await page.wait_for_url(f"{console.base}/console/dlq/{dlq_id}")
    assert "resolved" in await page.locator("#dlq-state").inner_text()
    assert "console:ops" in await page.locator("#dlq-state").inner_text()
    await wait_until(
        lambda: pool.fetchval(
            "SELECT status = 'confirmed' FROM payment_events WHERE event_id = $1", event_id
        ),
        limit_s=LIMIT_S,
        what="the replayed event to be confirmed",
    )
    audit = await pool.fetchrow(
        "SELECT resolved_at, resolved_by, resolution FROM dead_letter_queue WHERE id = $1", dlq_id
    )
    assert audit["resolved_at"] is not None
    assert audit["resolved_by"] == "console:ops"
    assert "reason: worker fixed in 1.2.3" in audit["resolution"]
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account.id) == Decimal(
        "5"
    )

    # A second replay is refused with a clear message, and nothing more happens.
    async with httpx.AsyncClient(base_url=console.base, cookies={"payflow_console": cookie}) as raw:
        page_html = (await raw.get(f"/console/dlq/{dlq_id}")).text
        assert 'action="/console/dlq/' not in page_html  # no Replay form on a resolved row
        again = await raw.post(
            f"/console/dlq/{dlq_id}/replay",
            data={"reason": "again", "csrf_token": _csrf(await raw.get("/console/jobs"))},
        )
    assert again.status_code == 409
    assert "Already replayed by console:ops" in again.text
    assert (
        await pool.fetchval("SELECT count(*) FROM balance_events WHERE account_id = $1", account.id)
        == 1
    )

    # Sign out: the old cookie no longer opens anything.
    await page.click(".signout button")
    await page.wait_for_url(f"{console.base}/console/signin")
    async with httpx.AsyncClient(base_url=console.base, cookies={"payflow_console": cookie}) as raw:
        stale = await raw.get("/console/payments")
    assert stale.status_code == 303
    assert stale.headers["location"] == "/console/signin"
    await context.close()


async def _chain_world(
    pool: asyncpg.Pool, settings: Settings, console: Console, keys: Keys
) -> ChainWorld:
    async with httpx.AsyncClient(base_url=console.base, timeout=10) as api:
        return await seed_chain(
            pool, settings, api, shop_key=keys.shop, other_key=keys.other, admin_key=keys.admin
        )


def _csrf(response: httpx.Response) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', response.text)
    assert found is not None, response.text
    return found.group(1)


async def test_merchant_sees_only_its_own_and_sign_in_failures_are_limited(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    keys: Keys,
    console: Console,
    browser: Browser,
) -> None:
    async with httpx.AsyncClient(base_url=console.base, timeout=10) as api:
        created = await api.post(
            "/api/v1/payments",
            json={"amount": "3", "currency": "EUR"},
            headers={"X-API-Key": keys.other, "Idempotency-Key": "other-1"},
        )
    assert created.status_code == 202, created.text
    others = created.json()["payment_id"]

    context = await browser.new_context(viewport={"width": 390, "height": 844})  # a phone
    page = await context.new_page()
    await sign_in(page, console, keys.shop)
    await shot(page, console, "merchant_overview")
    assert await page.locator("#verdict").count() == 0  # no operator status for a merchant
    listing = await page.goto(f"{console.base}/console/payments")
    assert listing is not None
    assert listing.headers["x-frame-options"] == "DENY"
    assert "script-src" not in listing.headers["content-security-policy"]  # default-src 'none'
    assert "default-src 'none'" in listing.headers["content-security-policy"]
    assert listing.headers["referrer-policy"] == "no-referrer"
    assert others not in await page.content()
    assert "No payments match" in await page.content()  # the empty state says what appears

    world = await _chain_world(pool, pipe_settings, console, keys)
    await page.goto(f"{console.base}/console/deposits?status=all")
    await shot(page, console, "merchant_deposits")
    assert quote(world.credited) in await page.content()
    await page.goto(f"{console.base}/console/payouts/{world.confirmed_payout}")
    await shot(page, console, "merchant_payout")
    assert await page.locator("#hot-wallets").count() == 0
    for path in (
        f"/console/payments/{others}",
        f"/console/deposits/{quote(world.others_deposit)}",
        f"/console/payouts/{world.others_payout}",
        "/console/deposits/reports",
        "/console/dlq",
        "/console/jobs",
        "/console/x",
    ):
        response = await page.goto(f"{console.base}{path}")
        assert response is not None and response.status == 404, path
    await shot(page, console, "merchant_404")
    cookie = next(c for c in await context.cookies() if c["name"] == "payflow_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["expires"] > 0
    await context.close()

    # Wrong keys from one address: after MAX_FAILURES the right key is refused too.
    async with httpx.AsyncClient(base_url=console.base, timeout=10) as raw:
        for _ in range(MAX_FAILURES):
            form = await raw.get("/console/signin")
            bad = await raw.post(
                "/console/signin", data={"api_key": "pf_wrong", "csrf_token": _csrf(form)}
            )
            assert bad.status_code == 401
        form = await raw.get("/console/signin")
        limited = await raw.post(
            "/console/signin", data={"api_key": keys.shop, "csrf_token": _csrf(form)}
        )
    assert limited.status_code == 429
    assert "payflow_console=" not in limited.headers.get("set-cookie", "")
