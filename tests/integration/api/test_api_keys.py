"""Several API keys per merchant: create (shown once, stored hashed), list, read, revoke;
a read key refused on every non-GET route that needs a key (found by enumerating the
app's routes); expired and revoked keys 401, a revocation seen by another process within
API_AUTH_CACHE_SECONDS; another merchant's keys 404; last_used_at stamped, throttled."""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from payflow.api.auth import authenticate
from payflow.api.keys import revoke_key
from payflow.app import create_app
from payflow.config import Settings
from payflow.errors import Conflict

from .conftest import API_KEY, _client

KEY_RE = re.compile(r"pf_live_[A-Za-z0-9_-]{43}")
PROBLEM = "application/problem+json"


async def _create(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    answer = await client.post("/api/v1/api-keys", json={"scope": "write", **body})
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def _row(app: FastAPI, key_id: str) -> Any:
    async with app.state.api.pool.acquire() as conn:
        return await conn.fetchrow("SELECT * FROM api_keys WHERE id = $1::uuid", key_id)


async def test_create_shows_the_key_once_and_stores_only_its_hash(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    created = await _create(client, name="checkout server", scope="read")
    assert KEY_RE.fullmatch(created["key"])
    assert created["name"] == "checkout server" and created["scope"] == "read"
    assert created["status"] == "active" and created["hint"] == created["key"][-4:]
    assert created["expires_at"] is None and created["revoked_at"] is None
    row = await _row(app, created["id"])
    assert row["key_hash"] == hashlib.sha256(created["key"].encode()).hexdigest()
    assert created["key"] not in repr(dict(row))

    listed = (await client.get("/api/v1/api-keys")).json()["items"]
    assert [k["name"] for k in listed] == ["default", "checkout server"]
    assert all("key" not in k for k in listed)
    one = await client.get(f"/api/v1/api-keys/{created['id']}")
    assert one.status_code == 200 and "key" not in one.json()
    assert one.json()["id"] == created["id"]

    async with _client(app, created["key"]) as reader:
        assert (await reader.get("/api/v1/api-keys")).status_code == 200


async def test_a_bootstrap_merchants_key_is_its_default_write_key(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    (default,) = (await client.get("/api/v1/api-keys")).json()["items"]
    assert (default["name"], default["scope"], default["status"]) == ("default", "write", "active")
    # Restarting the API (the bootstrap again) adds nothing.
    async with app.state.api.pool.acquire() as conn:
        before = await conn.fetchval("SELECT count(*) FROM api_keys")
    again = create_app(app.state.api.settings)
    async with again.router.lifespan_context(again):
        pass
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM api_keys") == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x" * 101, "scope": "write"}, "name"),
        ({"name": "", "scope": "write"}, "name"),
        ({"name": "   ", "scope": "write"}, "name"),
        ({"name": "line\nbreak", "scope": "write"}, "name"),
        ({"name": "ok", "scope": "admin"}, "scope"),
        ({"name": "ok"}, "scope"),
        ({"name": "ok", "scope": "read", "expires_at": "2020-01-01T00:00:00Z"}, "expires_at"),
        ({"name": "ok", "scope": "read", "expires_at": "2030-01-01T00:00:00"}, "expires_at"),
        ({"name": "ok", "scope": "read", "expires_at": "9999-12-31T23:59:59-05:00"}, "expires_at"),
        ({"name": "ok", "scope": "read", "expires_at": 1893456000}, "expires_at"),
        ({"name": "ok", "scope": "read", "extra": 1}, "extra"),
    ],
)
async def test_bad_input_is_a_422_problem(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    answer = await client.post("/api/v1/api-keys", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith(PROBLEM)
    assert field in answer.text


async def test_malformed_and_unknown_ids(client: httpx.AsyncClient) -> None:
    for method in ("GET", "DELETE"):
        bad = await client.request(method, "/api/v1/api-keys/not-a-uuid")
        assert bad.status_code == 422 and bad.headers["content-type"].startswith(PROBLEM)
        unknown = await client.request(method, f"/api/v1/api-keys/{uuid.uuid4()}")
        assert unknown.status_code == 404 and unknown.headers["content-type"].startswith(PROBLEM)


async def test_another_merchants_keys_are_404(
    app: FastAPI, client: httpx.AsyncClient, other: httpx.AsyncClient
) -> None:
    mine = await _create(client, name="mine")
    for method in ("GET", "DELETE"):
        answer = await other.request(method, f"/api/v1/api-keys/{mine['id']}")
        assert answer.status_code == 404, answer.text
    assert [k["name"] for k in (await other.get("/api/v1/api-keys")).json()["items"]] == ["default"]
    assert (await _row(app, mine["id"]))["revoked_at"] is None


async def test_revoke_is_401_at_once_here_and_idempotent(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    second = await _create(client, name="second")
    async with _client(app, second["key"]) as holder:
        assert (await holder.get("/health")).status_code == 200  # now cached
        revoked = await client.delete(f"/api/v1/api-keys/{second['id']}")
        assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
        answer = await holder.get("/health")
        assert answer.status_code == 401 and answer.headers["content-type"].startswith(PROBLEM)
    again = await client.delete(f"/api/v1/api-keys/{second['id']}")
    assert again.status_code == 200 and again.json()["revoked_at"] == revoked.json()["revoked_at"]


async def test_the_last_write_key_cannot_be_revoked_but_the_key_in_use_can(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    (default,) = (await client.get("/api/v1/api-keys")).json()["items"]
    reader = await _create(client, name="reader", scope="read")
    refused = await client.delete(f"/api/v1/api-keys/{default['id']}")
    assert refused.status_code == 409 and "last active write key" in refused.json()["detail"]
    assert (await _row(app, default["id"]))["revoked_at"] is None
    # A read key may not revoke anything, not even itself.
    async with _client(app, reader["key"]) as read_only:
        assert (await read_only.delete(f"/api/v1/api-keys/{reader['id']}")).status_code == 403
    successor = await _create(client, name="successor")
    assert (await client.delete(f"/api/v1/api-keys/{default['id']}")).status_code == 200
    assert (await client.get("/health")).status_code == 401  # the key it was using
    async with _client(app, successor["key"]) as fresh:
        assert (await fresh.get("/health")).status_code == 200


def _needs_key(dependant: Dependant) -> bool:
    return any(d.call is authenticate or _needs_key(d) for d in dependant.dependencies)


def _api_routes(app: FastAPI) -> list[tuple[str, APIRoute, bool]]:
    """Every APIRoute of the app as (full path, route, needs a key through a dependency of
    an include): FastAPI 0.165 keeps an included router whole (`original_router`), with
    its prefix and dependencies in `include_context`."""
    found: list[tuple[str, APIRoute, bool]] = []
    pending: list[tuple[str, bool, Any]] = [("", False, route) for route in app.routes]
    while pending:
        prefix, keyed, route = pending.pop()
        included = getattr(route, "original_router", None)
        if included is not None:
            context = route.include_context
            keyed = keyed or any(d.dependency is authenticate for d in context.dependencies)
            pending.extend((prefix + context.prefix, keyed, r) for r in included.routes)
        elif isinstance(route, APIRoute):
            found.append((prefix + route.path_format, route, keyed))
    return found


def _keyed_routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path with every parameter filled) of each route that needs X-API-Key."""
    found = []
    for path, route, keyed in _api_routes(app):
        if not (keyed or _needs_key(route.dependant)):
            continue
        for name in route.param_convertors:
            path = path.replace("{" + name + "}", str(uuid.uuid4()))
        found.extend((method, path) for method in sorted(route.methods))
    return found


async def test_a_read_key_is_refused_on_every_route_that_is_not_a_get(
    app: FastAPI, admin: httpx.AsyncClient
) -> None:
    """An admin's read key: the 403 can only come from the key's scope, also on operator
    routes. New routes are covered by enumeration, never by a list kept here."""
    reader = await _create(admin, name="admin reader", scope="read")
    routes = _keyed_routes(app)
    writes = [(m, p) for m, p in routes if m not in {"GET", "HEAD"}]
    reads = [(m, p) for m, p in routes if m in {"GET", "HEAD"}]
    names = {(m, re.sub(r"[0-9a-f-]{36}", "{id}", p)) for m, p in writes}
    assert {
        ("POST", "/api/v1/payments"),
        ("POST", "/api/v1/api-keys"),
        ("DELETE", "/api/v1/api-keys/{id}"),
    } <= names, names
    assert len(reads) >= 5
    headers = {"Idempotency-Key": f"k-{uuid.uuid4().hex}"}
    async with _client(app, reader["key"]) as client:
        for method, path in writes:
            answer = await client.request(method, path, json={}, headers=headers)
            assert answer.status_code == 403, (method, path, answer.text)
            assert answer.headers["content-type"].startswith(PROBLEM)
            assert "read-only" in answer.json()["detail"], (method, path)
        for method, path in reads:
            answer = await client.request(method, path)
            assert answer.status_code not in (401, 403), (method, path, answer.text)
        assert (await client.head("/api/v1/api-keys")).status_code == 200


async def test_openapi_lists_the_read_key_403_on_every_keyed_write(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """Every keyed route but GET and HEAD answers a read key 403 (the test above), so
    /openapi.json must list a 403 for each of them, also for routes whose module did not
    say so (payments, accounts, webhook endpoints, redelivery, ...)."""
    document = (await client.get("/openapi.json")).json()
    writes = [
        (method.lower(), path)
        for path, route, keyed in _api_routes(app)
        if (keyed or _needs_key(route.dependant)) and route.include_in_schema
        for method in route.methods
        if method not in {"GET", "HEAD"}
    ]
    assert ("post", "/api/v1/webhook-endpoints") in writes
    assert ("post", "/api/v1/payments") in writes
    missing = [(m, p) for m, p in writes if "403" not in document["paths"][p][m]["responses"]]
    assert missing == []
    provider = document["paths"]["/api/v1/webhooks/provider"]["post"]["responses"]
    assert "403" not in provider  # no key: nothing to be read-only


async def test_a_write_key_moves_money_and_a_read_key_reads_it(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    reader = await _create(client, name="reader", scope="read")
    body = {"amount": "1.00", "currency": "USD"}
    async with _client(app, reader["key"]) as read_only:
        refused = await read_only.post(
            "/api/v1/payments", json=body, headers={"Idempotency-Key": "pay-1"}
        )
        assert refused.status_code == 403
        created = await client.post(
            "/api/v1/payments", json=body, headers={"Idempotency-Key": "pay-1"}
        )
        assert created.status_code in (201, 202), created.text
        seen = await read_only.get(f"/api/v1/payments/{created.json()['payment_id']}")
        assert seen.status_code == 200, seen.text
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM payments") == 1


@pytest.fixture
def quick_settings(api_settings: Settings) -> Settings:
    return api_settings.model_copy(update={"api_auth_cache_seconds": 1.0})


@pytest.fixture
async def two_apps(quick_settings: Settings) -> AsyncIterator[tuple[FastAPI, FastAPI]]:
    """Two API processes' worth of state (each its own auth cache) on one database."""
    first, second = create_app(quick_settings), create_app(quick_settings)
    async with first.router.lifespan_context(first), second.router.lifespan_context(second):
        yield first, second


async def test_a_revocation_reaches_another_process_within_the_cache_time(
    two_apps: tuple[FastAPI, FastAPI],
) -> None:
    here, there = two_apps
    async with _client(here, API_KEY) as owner:
        key = await _create(owner, name="elsewhere")
        async with _client(there, key["key"]) as remote:
            assert (await remote.get("/health")).status_code == 200  # cached there
            assert (await owner.delete(f"/api/v1/api-keys/{key['id']}")).status_code == 200
            revoked_at = asyncio.get_running_loop().time()
            while (await remote.get("/health")).status_code == 200:
                assert asyncio.get_running_loop().time() - revoked_at < 1.0 + 0.5
                await asyncio.sleep(0.1)
            assert (await remote.get("/health")).status_code == 401


async def test_an_expired_key_is_401_even_while_cached(two_apps: tuple[FastAPI, FastAPI]) -> None:
    here, _ = two_apps
    # A long cache: the entry must still end with the key's expiry.
    here.state.api.settings = here.state.api.settings.model_copy(
        update={"api_auth_cache_seconds": 300.0}
    )
    expires = datetime.now(UTC) + timedelta(seconds=1.5)
    async with _client(here, API_KEY) as owner:
        key = await _create(owner, name="brief", expires_at=expires.isoformat())
        async with _client(here, key["key"]) as holder:
            assert (await holder.get("/health")).status_code == 200
            await asyncio.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.2)
            assert (await holder.get("/health")).status_code == 401
        (listed,) = [
            k for k in (await owner.get("/api/v1/api-keys")).json()["items"] if k["name"] == "brief"
        ]
        assert listed["status"] == "expired"


async def test_last_used_at_is_stamped_and_throttled(two_apps: tuple[FastAPI, FastAPI]) -> None:
    here, _ = two_apps
    async with _client(here, API_KEY) as owner:
        key = await _create(owner, name="used")
        assert (await _row(here, key["id"]))["last_used_at"] is None
        async with _client(here, key["key"]) as holder:
            assert (await holder.get("/health")).status_code == 200
            first = (await _row(here, key["id"]))["last_used_at"]
            assert first is not None
            await asyncio.sleep(1.1)  # past the cache: looked up again, within the minute
            assert (await holder.get("/health")).status_code == 200
            assert (await _row(here, key["id"]))["last_used_at"] == first
        one = await owner.get(f"/api/v1/api-keys/{key['id']}")
        assert one.json()["last_used_at"] is not None


async def test_the_service_role_may_only_revoke_and_stamp_keys(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """Least privilege (payflow_grant_extra_0038_api_keys): no DELETE, no change of a
    key's secret, scope, merchant or name; only revoked_at and last_used_at move."""
    key = await _create(client, name="guarded", scope="read")
    async with app.state.api.pool.acquire() as conn:
        for statement in (
            "DELETE FROM api_keys WHERE id = $1::uuid",
            "UPDATE api_keys SET scope = 'write' WHERE id = $1::uuid",
            "UPDATE api_keys SET key_hash = repeat('0', 64) WHERE id = $1::uuid",
            "UPDATE api_keys SET expires_at = NULL WHERE id = $1::uuid",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement, key["id"])
        await conn.execute(
            "UPDATE api_keys SET last_used_at = now() WHERE id = $1::uuid", key["id"]
        )
    assert (await _row(app, key["id"]))["scope"] == "read"


async def test_two_revocations_at_once_keep_one_write_key(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """Each revocation locks the merchant's keys: the second waits for the first, then
    sees it and refuses to revoke what became the last write key."""
    second = await _create(client, name="second")
    (default,) = [k for k in (await client.get("/api/v1/api-keys")).json()["items"]
                  if k["name"] == "default"]  # fmt: skip
    merchant = (await _row(app, default["id"]))["merchant_id"]
    pool = app.state.api.pool
    async with pool.acquire() as first_conn, pool.acquire() as second_conn:
        first_tx = first_conn.transaction()
        await first_tx.start()
        await revoke_key(first_conn, uuid.UUID(default["id"]), merchant)
        async with second_conn.transaction():
            racing = asyncio.create_task(revoke_key(second_conn, uuid.UUID(second["id"]), merchant))
            await asyncio.sleep(0.3)
            assert not racing.done()  # waiting on the first revocation's locks
            await first_tx.commit()
            with pytest.raises(Conflict):
                await racing
    assert (await _row(app, default["id"]))["revoked_at"] is not None
    assert (await _row(app, second["id"]))["revoked_at"] is None


async def test_a_merchant_holds_at_most_the_cap_of_active_keys(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("payflow.api.keys.MAX_ACTIVE_KEYS", 3)
    extra = [await _create(client, name=f"k{n}", scope="read") for n in range(2)]
    refused = await client.post("/api/v1/api-keys", json={"name": "k3", "scope": "read"})
    assert refused.status_code == 409 and "at most 3 active keys" in refused.json()["detail"]
    assert (await client.delete(f"/api/v1/api-keys/{extra[0]['id']}")).status_code == 200
    await _create(client, name="k3", scope="read")
