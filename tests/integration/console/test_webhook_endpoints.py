"""The console's webhook endpoint pages: a merchant creates (the secret shown once),
rotates, disables and enables its endpoints, reads their deliveries and redelivers; another
merchant gets 404; an admin sees all; an auto-disabled endpoint shows its notice."""

from __future__ import annotations

import re

import httpx
from fastapi import FastAPI

from payflow.webhooks import EventKind, record_event
from payflow.webhooks.endpoints.store import MAX_ENDPOINTS

from .conftest import Merchants, signed_in


def _csrf(page: httpx.Response) -> str:
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None, page.text
    return token.group(1)


async def test_a_merchant_manages_its_endpoints_and_an_admin_sees_them(
    console_app: FastAPI, merchants: Merchants
) -> None:
    pool = console_app.state.api.pool
    async with signed_in(console_app, merchants.shop) as shop:
        listing = await shop.get("/console/webhook-endpoints")
        assert listing.status_code == 200
        token = _csrf(listing)
        refused = await shop.post(
            "/console/webhook-endpoints",
            data={"csrf_token": token, "url": "http://10.0.0.1/x", "events": "*"},
        )
        assert refused.status_code == 400 and 'id="message"' in refused.text
        made = await shop.post(
            "/console/webhook-endpoints",
            data={"csrf_token": token, "url": "http://127.0.0.1:9/h", "events": "payout.sent"},
        )
        assert made.status_code == 201, made.text
        secret = re.search(r"<code>(whsec_[^<]+)</code>", made.text)
        assert secret is not None
        endpoint_id = await pool.fetchval("SELECT id FROM webhook_endpoints")
        path = f"/console/webhook-endpoints/{endpoint_id}"
        again = await shop.get(path)
        assert secret.group(1) not in again.text  # shown once
        rotated = await shop.post(f"{path}/rotate", data={"csrf_token": token})
        new = re.search(r"<code>(whsec_[^<]+)</code>", rotated.text)
        assert new is not None and new.group(1) != secret.group(1)
        off = await shop.post(f"{path}/enabled", data={"csrf_token": token, "enabled": "false"})
        assert off.status_code == 303
        assert ">disabled<" in (await shop.get(path)).text
        async with pool.acquire() as conn, conn.transaction():
            event = await record_event(conn, merchants.shop_id, EventKind.PAYOUT_SENT, "po-1", {})
        # Disabled, nothing would send it: refused (409) with the reason, not queued.
        held = await shop.post(
            f"{path}/redeliver", data={"csrf_token": token, "event_id": str(event)}
        )
        assert held.status_code == 409 and "disabled" in held.text, held.text
        on = await shop.post(f"{path}/enabled", data={"csrf_token": token, "enabled": "true"})
        assert on.status_code == 303
        redone = await shop.post(
            f"{path}/redeliver", data={"csrf_token": token, "event_id": str(event)}
        )
        assert redone.status_code == 200 and "sent again" in redone.text
        assert event in redone.text  # its delivery is listed
        await pool.execute(
            "UPDATE webhook_endpoints SET enabled = false, disabled_reason = 'failing',"
            " disabled_at = now(), failing_since = now() - interval '6 days'"
        )
        assert 'id="auto-disabled"' in (await shop.get(path)).text
    async with signed_in(console_app, merchants.other) as other:
        assert (await other.get(path)).status_code == 404
        assert str(endpoint_id) not in (await other.get("/console/webhook-endpoints")).text
    async with signed_in(console_app, merchants.admin) as ops:
        assert str(endpoint_id) in (await ops.get("/console/webhook-endpoints")).text
        assert (await ops.get(path)).status_code == 200


async def test_the_console_refuses_an_endpoint_past_the_cap(
    console_app: FastAPI, merchants: Merchants
) -> None:
    pool = console_app.state.api.pool
    for n in range(MAX_ENDPOINTS):
        await pool.execute(
            "INSERT INTO webhook_endpoints (merchant_id, url, enabled_events, secret)"
            " VALUES ($1, $2, '{*}', 'whsec_x')",
            merchants.shop_id,
            f"http://127.0.0.1:9/{n}",
        )
    async with signed_in(console_app, merchants.shop) as shop:
        token = _csrf(await shop.get("/console/webhook-endpoints"))
        form = {"csrf_token": token, "url": "http://127.0.0.1:9/one-more", "events": "*"}
        refused = await shop.post("/console/webhook-endpoints", data=form)
        assert refused.status_code == 409 and "at most" in refused.text
        count = "SELECT count(*) FROM webhook_endpoints WHERE merchant_id = $1"
        assert await pool.fetchval(count, merchants.shop_id) == MAX_ENDPOINTS
        await pool.execute("UPDATE webhook_endpoints SET deleted_at = now(), enabled = false")
        assert (await shop.post("/console/webhook-endpoints", data=form)).status_code == 201


async def test_the_console_refuses_a_long_description_instead_of_cutting_it(
    console_app: FastAPI, merchants: Merchants
) -> None:
    """The API answers 422 past 500 characters; the console said nothing and stored the
    first 500. Both refuse now, and what is stored is what was written."""
    pool = console_app.state.api.pool
    async with signed_in(console_app, merchants.shop) as shop:
        token = _csrf(await shop.get("/console/webhook-endpoints"))
        form = {"csrf_token": token, "url": "http://127.0.0.1:9/d", "events": "*"}
        long = await shop.post(
            "/console/webhook-endpoints", data={**form, "description": "d" * 501}
        )
        assert long.status_code == 400 and "at most 500" in long.text
        assert await pool.fetchval("SELECT count(*) FROM webhook_endpoints") == 0
        made = await shop.post(
            "/console/webhook-endpoints", data={**form, "description": "é" * 500}
        )
        assert made.status_code == 201, made.text
        assert await pool.fetchval("SELECT description FROM webhook_endpoints") == "é" * 500


async def test_the_console_refuses_control_and_bidi_characters_in_a_description(
    console_app: FastAPI, merchants: Merchants
) -> None:
    """A description holding a control character or a bidi override was stored as sent;
    the console answers 400 with the rule, as the API answers 422."""
    pool = console_app.state.api.pool
    async with signed_in(console_app, merchants.shop) as shop:
        token = _csrf(await shop.get("/console/webhook-endpoints"))
        form = {"csrf_token": token, "url": "http://127.0.0.1:9/d", "events": "*"}
        for bad in ("a\x01b", "invoice\u202egnp.exe", "a\u2066b", "a\x85b"):
            answer = await shop.post(
                "/console/webhook-endpoints", data={**form, "description": bad}
            )
            assert answer.status_code == 400, (bad, answer.text)
            assert "control characters" in answer.text, answer.text
        assert await pool.fetchval("SELECT count(*) FROM webhook_endpoints") == 0


async def test_the_console_reads_an_endpoint_by_its_canonical_id_only(
    console_app: FastAPI, merchants: Merchants
) -> None:
    """`{…}`, bare hex and `urn:uuid:` spellings of an id found the endpoint; they are no
    id, as in the API (there a 422, here the console's 404 for a malformed id)."""
    pool = console_app.state.api.pool
    async with signed_in(console_app, merchants.shop) as shop:
        token = _csrf(await shop.get("/console/webhook-endpoints"))
        made = await shop.post(
            "/console/webhook-endpoints",
            data={"csrf_token": token, "url": "http://127.0.0.1:9/u", "events": "*"},
        )
        assert made.status_code == 201, made.text
        ident = await pool.fetchval("SELECT id FROM webhook_endpoints")
        assert (await shop.get(f"/console/webhook-endpoints/{ident}")).status_code == 200
        for spelling in ("{" + str(ident) + "}", ident.hex, ident.urn):
            answer = await shop.get(f"/console/webhook-endpoints/{spelling}")
            assert answer.status_code == 404, (spelling, answer.text)
