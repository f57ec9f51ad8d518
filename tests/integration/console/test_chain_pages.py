"""The console's chain pages on real PostgreSQL: deposits (awaiting finality first), their
reports, payouts and the hot wallets as the database knows them. Tenancy (another
merchant's deposit or payout is the unknown-id 404), filters, cursor pages, escaping of
text chosen outside (a provider's event id, a refuted report's reason), empty states,
and that nothing on these pages can change anything."""

from __future__ import annotations

import html
import re
import uuid
from urllib.parse import quote

import asyncpg
import httpx
from fastapi import FastAPI
from fastapi.routing import APIRoute

from payflow.config import Settings
from payflow.console.chain_pages import router
from tests.integration.console.chain_world import SCRIPT, WEI, ChainWorld, _scanned, seed_chain

from .conftest import Merchants, signed_in


async def _world(app: FastAPI, api: httpx.AsyncClient, keys: Merchants) -> ChainWorld:
    st = app.state.api
    return await seed_chain(
        st.pool, st.settings, api, shop_key=keys.shop, other_key=keys.other, admin_key=keys.admin
    )


def _deposit(tid: str) -> str:
    return f"/console/deposits/{quote(tid)}"


def _text(response: httpx.Response) -> str:
    """The page's visible text, roughly: tags dropped, entities decoded, spaces squeezed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.text)).split())


async def test_a_merchant_sees_only_its_own_deposits_and_payouts(
    console_app: FastAPI, api: httpx.AsyncClient, merchants: Merchants
) -> None:
    world = await _world(console_app, api, merchants)
    async with signed_in(console_app, merchants.shop) as shop:
        listing = await shop.get("/console/deposits")
        assert listing.status_code == 200
        assert quote(world.awaiting) in listing.text  # awaiting finality is the default
        for absent in (world.credited, world.orphaned, world.others_deposit):
            assert quote(absent) not in listing.text
        assert "≥ 11 conf." in _text(listing)  # block 100, the scanner walked up to 110
        every = await shop.get("/console/deposits?status=all")
        for present in (world.awaiting, world.credited, world.orphaned):
            assert quote(present) in every.text
        assert quote(world.others_deposit) not in every.text
        credited = await shop.get("/console/deposits?status=credited")
        assert quote(world.credited) in credited.text and quote(world.awaiting) not in credited.text
        assert f"/console/events/{quote('chain:' + world.credited)}" in credited.text

        detail = await shop.get(_deposit(world.awaiting))
        assert detail.status_code == 200
        text = _text(detail)
        assert "awaiting finality" in text and "at least 11 confirmations" in text
        assert "1.500000000000000000 ETH" in text  # at ETH's scale
        for source in ("scanner", "webhook"):
            assert source in text
        assert "refuted" in text and f"another amount {SCRIPT}" in text
        assert "<script>" not in detail.text and "&lt;script&gt;" in detail.text

        payouts = await shop.get("/console/payouts")
        for mine in (world.confirmed_payout, world.stuck_payout, world.waiting_payout):
            assert str(mine) in payouts.text
        assert str(world.others_payout) not in payouts.text
        assert 'id="hot-wallets"' not in payouts.text  # operators only

        for path in (
            _deposit(world.others_deposit),
            _deposit("ETH_MAINNET:0x" + "00" * 32 + ":-1"),
            f"/console/payouts/{world.others_payout}",
            f"/console/payouts/{uuid.uuid4()}",
            "/console/deposits/reports",
        ):
            hidden = await shop.get(path)
            assert hidden.status_code == 404, path
            assert world.other_account.hex not in hidden.text.replace("-", "")
        assert (await shop.get("/console/payouts/not-an-id")).status_code == 400

    async with signed_in(console_app, merchants.other) as other:
        assert (await other.get(_deposit(world.awaiting))).status_code == 404
        assert (await other.get(f"/console/payouts/{world.confirmed_payout}")).status_code == 404
        mine = await other.get(f"/console/payouts/{world.others_payout}")
        assert mine.status_code == 200 and "hot wallet balance too low" in mine.text
        overview = _text(await other.get("/console"))
        assert "Deposits awaiting finality 1 Payouts in flight 1" in overview


async def test_an_operator_sees_every_merchant_the_reports_and_the_hot_wallets(
    console_app: FastAPI, api: httpx.AsyncClient, merchants: Merchants
) -> None:
    world = await _world(console_app, api, merchants)
    async with signed_in(console_app, merchants.admin) as ops:
        overview = _text(await ops.get("/console"))
        assert "Deposits awaiting finality 2 Payouts in flight 3" in overview
        listing = await ops.get("/console/deposits")
        assert quote(world.awaiting) in listing.text and quote(world.others_deposit) in listing.text
        assert "other-shop" in listing.text  # the merchant column

        reports = await ops.get("/console/deposits/reports")
        text = _text(reports)
        assert f"gen:{SCRIPT}" in text and f"another amount {SCRIPT}" in text
        assert "pending" in text and "gen:ok-1" in text
        assert "<script>" not in reports.text and "&lt;script&gt;" in reports.text
        confirmed = _text(await ops.get("/console/deposits/reports?status=confirmed"))
        assert "gen:ok-1" not in confirmed and "scanner" in confirmed
        assert (await ops.get("/console/deposits/reports?status=lost")).status_code == 400

        payouts = await ops.get("/console/payouts")
        text = _text(payouts)
        assert str(world.others_payout) in payouts.text
        assert 'id="hot-wallets"' in payouts.text and world.wallet in payouts.text
        assert "payflow wallet status" in text
        wallets = payouts.text.split('id="hot-wallets"', 1)[1]
        assert '<td class="num">2</td>' in wallets  # next nonce: two were taken
        stuck = wallets.split('id="stuck"', 1)[1].split("</table>", 1)[0]
        assert str(world.stuck_payout) in stuck and str(world.confirmed_payout) not in stuck
        waiting = _text(httpx.Response(200, text=wallets.split('id="waiting"', 1)[1]))
        assert "hot wallet balance too low" in waiting and str(world.others_payout) in waiting
        open_only = await ops.get("/console/payouts?status=open")
        assert str(world.confirmed_payout) not in open_only.text.split('id="hot-wallets"')[0]
        assert str(world.stuck_payout) in open_only.text

        detail = await ops.get(f"/console/payouts/{world.confirmed_payout}")
        text = _text(detail)
        assert "Fee held 0.002100000000000000 ETH" in text  # 21,000 gas x 100 gwei ceiling
        assert "Fee paid 0.000042000000000000 ETH" in text  # 21,000 gas x 2 gwei paid
        assert "fee bump: attempt 2" in text and "replaces attempt 1 (same nonce)" in text
        assert "posted: withdrawal " in text and "posted: withdrawal_fee" in text
        hashes = await console_app.state.api.pool.fetch(
            "SELECT tx_hash FROM payout_txs WHERE payout_id = $1 ORDER BY attempt",
            world.confirmed_payout,
        )
        assert len(hashes) == 2 and all(h["tx_hash"] in detail.text for h in hashes)
        assert f"{hashes[1]['tx_hash']}</code> <strong>landed</strong>" in detail.text
        steps = re.findall(r"<strong>([^<]+)</strong>", detail.text.split('id="timeline"')[1])
        assert steps[0] == "held" and steps.index("signed") < steps.index("fee bump: attempt 2")
        assert steps.index("fee bump: attempt 2") < steps.index("confirmed")


async def test_empty_states_filters_and_cursor_pages(
    console_app: FastAPI,
    api: httpx.AsyncClient,
    merchants: Merchants,
    console_settings: Settings,
) -> None:
    async with signed_in(console_app, merchants.admin) as ops:
        assert "No deposits awaiting finality." in _text(await ops.get("/console/deposits"))
        assert "No reversed deposits." in _text(await ops.get("/console/deposits?status=reversed"))
        assert "No unverified reports." in _text(await ops.get("/console/deposits/reports"))
        payouts = _text(await ops.get("/console/payouts"))
        assert "No payouts match." in payouts
        assert "No hot wallet has signed anything yet." in payouts
        assert "No stuck transactions." in payouts and "No payout waits." in payouts
        bad = await ops.get("/console/deposits?status=pending")
        assert bad.status_code == 400 and "status must be one of" in bad.text
        assert (await ops.get("/console/payouts?cursor=%%%")).status_code == 400

    # Seven deposits, pages of five: every one exactly once, newest first.
    pool: asyncpg.Pool = console_app.state.api.pool
    made = await api.post(
        "/api/v1/accounts", json={"asset": "ETH"}, headers={"X-API-Key": merchants.shop}
    )
    account = made.json()["account_id"]
    address = "0x" + uuid.uuid4().hex + "00000000"
    await api.post(
        f"/api/v1/accounts/{account}/deposit-addresses",
        json={"chain": "ETH_MAINNET", "address": address},
        headers={"X-API-Key": merchants.admin},
    )
    ids = [await _scanned(pool, console_settings, address, WEI + n, 200 + n) for n in range(7)]
    async with signed_in(console_app, merchants.shop) as shop:
        first = await shop.get("/console/deposits")
        found = re.search(r'class="next" href="([^"]+)"', first.text)
        assert found is not None
        second = await shop.get(html.unescape(found.group(1)))
        assert 'class="next"' not in second.text
        pages = re.findall(r'href="/console/deposits/([^"]+)"', first.text + second.text)
    assert pages == [quote(t) for t in reversed(ids)]


async def test_the_chain_pages_only_read(
    console_app: FastAPI, api: httpx.AsyncClient, merchants: Merchants
) -> None:
    assert {r.path: r.methods for r in router.routes if isinstance(r, APIRoute)} == {
        path: {"GET"}
        for path in (
            "/console/deposits",
            "/console/deposits/reports",
            "/console/deposits/{transfer_id}",
            "/console/payouts",
            "/console/payouts/{payout_id}",
        )
    }
    world = await _world(console_app, api, merchants)
    pool: asyncpg.Pool = console_app.state.api.pool
    state = "SELECT (SELECT array_agg((id, status, updated_at) ORDER BY id) FROM payouts)::text,"
    state += (
        " (SELECT array_agg((transfer_id, status) ORDER BY transfer_id) FROM chain_deposits)::text,"
    )
    state += " (SELECT array_agg((balance, held) ORDER BY id) FROM accounts)::text"
    before = await pool.fetchrow(state)
    async with signed_in(console_app, merchants.admin) as ops:
        token = re.search(r'name="csrf_token" value="([^"]+)"', (await ops.get("/console")).text)
        assert token is not None
        for path in (
            "/console/payouts",
            f"/console/payouts/{world.waiting_payout}",
            _deposit(world.awaiting),
            "/console/deposits/reports",
        ):
            for method in ("POST", "PUT", "PATCH", "DELETE"):
                answer = await ops.request(method, path, data={"csrf_token": token.group(1)})
                assert answer.status_code == 405, (method, path)
    assert await pool.fetchrow(state) == before


async def test_a_stalled_payout_shows_its_stall_and_the_operator_actions(
    console_app: FastAPI, api: httpx.AsyncClient, merchants: Merchants
) -> None:
    world = await _world(console_app, api, merchants)
    pool = console_app.state.api.pool
    await pool.execute(
        "UPDATE payouts SET stall = 'nonce_taken', stalled_at = now(),"
        " stall_detail = $2 WHERE id = $1",
        world.stuck_payout,
        f"nonce 0 was used by another transaction {SCRIPT}",
    )
    await pool.execute(
        "INSERT INTO payout_actions (payout_id, action, actor, reason, old_nonce, new_nonce)"
        " VALUES ($1, 'resign', 'alice', $2, 0, 7)",
        world.stuck_payout,
        f"the wallet app reused it {SCRIPT}",
    )
    async with signed_in(console_app, merchants.admin) as ops:
        listing = _text(await ops.get("/console/payouts?status=open"))
        assert "(stalled: nonce_taken)" in listing
        detail = await ops.get(f"/console/payouts/{world.stuck_payout}")
        text = _text(detail)
        assert "Stalled nonce_taken since" in text and "payflow payouts void|resign" in text
        assert f"operator resign by alice: the wallet app reused it {SCRIPT} (nonce 0 -> 7)" in text
        assert "stalled: nonce_taken" in text
        assert "<script>" not in detail.text


async def test_a_transfer_mismatch_shows_its_transfers_and_the_settle_action(
    console_app: FastAPI, api: httpx.AsyncClient, merchants: Merchants
) -> None:
    world = await _world(console_app, api, merchants)
    pool = console_app.state.api.pool
    detail = "the receipt moved the hot wallet's tokens otherwise than the payout: contract 0xc"
    await pool.execute(
        "UPDATE payouts SET stall = 'transfer_mismatch', stalled_at = now(),"
        " stall_detail = $2 WHERE id = $1",
        world.stuck_payout,
        detail,
    )
    async with signed_in(console_app, merchants.admin) as ops:
        listing = _text(await ops.get("/console/payouts?status=open"))
        assert "(stalled: transfer_mismatch)" in listing
        text = _text(await ops.get(f"/console/payouts/{world.stuck_payout}"))
        assert "Stalled transfer_mismatch since" in text and detail in text
        assert "payflow payouts settle" in text and "void|resign" not in text
