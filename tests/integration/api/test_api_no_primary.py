"""The API on a multi-host DSN: it reaches the writable host past a dead one, and answers
503 problem+json with Retry-After (never 500) while no host takes writes, whether the
driver refuses every host (`target_session_attrs=read-write`) or a session lands on a
node that refuses writes (SQLSTATE 25006); it answers 202 again once a primary is back."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import pytest

from payflow.app import create_app
from payflow.config import Settings
from tests.conftest import _url

from .conftest import API_KEY

BODY = {"amount": "1.00", "currency": "USD", "description": "failover", "metadata": {}}


def _behind_a_dead_host(url: str, query: str) -> str:
    """`url` as a multi-host DSN whose first host refuses connections (port 1)."""
    parts = urlsplit(url)
    user, _, server = parts.netloc.rpartition("@")
    netloc = f"{user}@127.0.0.1:1,{server}"
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


async def _set_read_only(database: str, on: bool) -> None:
    """Make `database` refuse writes in every new session (as a standby does), ending its
    open sessions so the change reaches them, or take writes again in new sessions."""
    admin = await asyncpg.connect(_url("postgres"))
    try:
        value = "on" if on else "off"
        setting = f"default_transaction_read_only = {value}"
        await admin.execute(f'ALTER DATABASE "{database}" SET {setting}')
        if not on:
            return
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = $1 AND pid <> pg_backend_pid()",
            database,
        )
    finally:
        await admin.close()


async def _post(client: httpx.AsyncClient, key: str) -> httpx.Response:
    return await client.post("/api/v1/payments", json=BODY, headers={"Idempotency-Key": key})


def _assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.headers["retry-after"] == "1"


@pytest.mark.parametrize(
    "query", ["target_session_attrs=read-write", ""], ids=["read-write", "no-attrs"]
)
async def test_no_writable_host_is_a_503_and_the_api_recovers_by_itself(
    api_settings: Settings, database_name: str, query: str
) -> None:
    dsn = _behind_a_dead_host(api_settings.database_url, query)
    settings = api_settings.model_copy(update={"database_url": dsn})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers={"X-API-Key": API_KEY}
        ) as client:
            assert (await _post(client, "before")).status_code == 202
            await _set_read_only(database_name, True)
            try:
                for attempt in range(3):  # each on a fresh session: none lands on a primary
                    _assert_unavailable(await _post(client, f"gap-{attempt}"))
            finally:
                await _set_read_only(database_name, False)
            # Sessions that met 25006 were dropped; an idle one opened during the gap
            # (read-only) may still answer one more 503, then the API takes writes again.
            statuses = []
            for _ in range(5):
                response = await _post(client, "after")
                statuses.append(response.status_code)
                if response.status_code == 202:
                    break
                _assert_unavailable(response)
            assert statuses[-1] == 202, statuses
    admin = await asyncpg.connect(_url(database_name))
    try:
        stored = await admin.fetchval(
            "SELECT count(*) FROM payments WHERE description = 'failover'"
        )
    finally:
        await admin.close()
    assert stored == 2  # the two accepted payments, none from the gap
