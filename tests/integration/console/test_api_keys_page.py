"""`/console/api-keys`: a merchant sees and manages its own keys (a created key is shown
once), an admin sees every merchant's; revoking the key a session signed in with ends that
session; a read key's session may look but not change; bad input is a 4xx page."""

from __future__ import annotations

import re
import uuid

import httpx
from fastapi import FastAPI

from .conftest import Merchants, signed_in

KEY_RE = re.compile(r"pf_live_[A-Za-z0-9_-]{43}")


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


async def _create(client: httpx.AsyncClient, **fields: str) -> httpx.Response:
    token = _csrf((await client.get("/console/api-keys")).text)
    return await client.post("/console/api-keys", data={"csrf_token": token, **fields})


async def _key_ids(app: FastAPI, merchant: str) -> dict[str, uuid.UUID]:
    async with app.state.api.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT k.name, k.id FROM api_keys k JOIN merchants m ON m.id = k.merchant_id"
            " WHERE m.name = $1",
            merchant,
        )
    return {row["name"]: row["id"] for row in rows}


async def _revoke(client: httpx.AsyncClient, key_id: object) -> httpx.Response:
    token = _csrf((await client.get("/console/api-keys")).text)
    return await client.post(f"/console/api-keys/{key_id}/revoke", data={"csrf_token": token})


async def test_create_shows_the_key_once_and_it_works(
    console_app: FastAPI, merchants: Merchants, api: httpx.AsyncClient
) -> None:
    async with signed_in(console_app, merchants.shop) as shop:
        made = await _create(shop, name="reports", scope="read", expires_at="2999-01-01T10:00")
        assert made.status_code == 201, made.text
        (key,) = KEY_RE.findall(made.text)
        assert made.headers["cache-control"] == "no-store"
        listing = await shop.get("/console/api-keys")
        assert "reports" in listing.text and key not in listing.text
        assert "…" + key[-4:] in listing.text and "2999-01-01 10:00:00" in listing.text
    assert (await api.get("/api/v1/api-keys", headers={"X-API-Key": key})).status_code == 200
    post = await api.post("/api/v1/api-keys", headers={"X-API-Key": key}, json={})
    assert post.status_code == 403


async def test_a_merchant_sees_its_own_keys_and_an_admin_every_merchants(
    console_app: FastAPI, merchants: Merchants
) -> None:
    other_key = (await _key_ids(console_app, "other-shop"))["default"]
    async with signed_in(console_app, merchants.shop) as shop:
        page = await shop.get("/console/api-keys")
        assert page.status_code == 200 and str(other_key) not in page.text
        refused = await _revoke(shop, other_key)
        assert refused.status_code == 404
    async with signed_in(console_app, merchants.admin) as admin:
        page = await admin.get("/console/api-keys")
        assert str(other_key) in page.text and "other-shop" in page.text
    async with console_app.state.api.pool.acquire() as conn:
        assert (
            await conn.fetchval("SELECT revoked_at FROM api_keys WHERE id = $1", other_key) is None
        )


async def test_revoking_a_key_ends_its_sessions_and_the_last_write_key_stays(
    console_app: FastAPI, merchants: Merchants
) -> None:
    async with signed_in(console_app, merchants.shop) as shop:
        made = await _create(shop, name="laptop", scope="write")
        (second,) = KEY_RE.findall(made.text)
        ids = await _key_ids(console_app, "shop")
        async with signed_in(console_app, second) as laptop:
            assert "(this session)" in (await laptop.get("/console/api-keys")).text
            revoked = await _revoke(shop, ids["laptop"])
            assert revoked.status_code == 303
            assert (await laptop.get("/console/api-keys")).status_code == 303  # to sign-in
        again = await _revoke(shop, ids["laptop"])
        assert again.status_code == 303  # idempotent
        last = await _revoke(shop, ids["default"])
        assert last.status_code == 409 and "last active write key" in last.text
        assert (await shop.get("/console/api-keys")).status_code == 200


async def test_a_read_keys_session_looks_but_changes_nothing(
    console_app: FastAPI, merchants: Merchants
) -> None:
    async with signed_in(console_app, merchants.shop) as shop:
        (reader,) = KEY_RE.findall((await _create(shop, name="ro", scope="read")).text)
    async with signed_in(console_app, reader) as read_only:
        page = await read_only.get("/console/api-keys")
        assert page.status_code == 200 and "read-only key" in page.text
        token = _csrf(page.text)
        made = await read_only.post(
            "/console/api-keys", data={"csrf_token": token, "name": "x", "scope": "write"}
        )
        assert made.status_code == 403
        ids = await _key_ids(console_app, "shop")
        revoke = await read_only.post(
            f"/console/api-keys/{ids['ro']}/revoke", data={"csrf_token": token}
        )
        assert revoke.status_code == 403
        assert set(ids) == {"default", "ro"}
        out = await read_only.post("/console/signout", data={"csrf_token": token})
        assert out.status_code == 303 and out.headers["location"] == "/console/signin"


async def test_bad_input_is_a_4xx_page(console_app: FastAPI, merchants: Merchants) -> None:
    async with signed_in(console_app, merchants.shop) as shop:
        for fields in (
            {"name": "x" * 101, "scope": "read"},
            {"name": "", "scope": "read"},
            {"name": "ok", "scope": "admin"},
            {"name": "ok", "scope": "read", "expires_at": "2001-01-01T00:00"},
            {"name": "ok", "scope": "read", "expires_at": "soon"},
        ):
            answer = await _create(shop, **fields)
            assert answer.status_code == 422, (fields, answer.text)
            assert 'id="message"' in answer.text
        for key_id in ("not-a-uuid", str(uuid.uuid4())):
            assert (await _revoke(shop, key_id)).status_code == 404
        no_token = await shop.post("/console/api-keys", data={"name": "x", "scope": "read"})
        assert no_token.status_code == 403
        assert set(await _key_ids(console_app, "shop")) == {"default"}
