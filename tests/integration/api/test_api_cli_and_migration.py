"""`payflow merchants create`, `payflow api` refusing a bad secret, and migration 0003."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from payflow.config import Settings
from payflow.db import migrate
from tests.conftest import OWNER_ROLE
from tests.processes import PAYFLOW_MAIN

from .server import server_env

CLI = PAYFLOW_MAIN


def test_api_refuses_to_start_without_a_long_secret() -> None:
    for value in ("", "too-short"):
        env = {**os.environ, "PROVIDER_WEBHOOK_SECRET": value}
        result = subprocess.run(
            [*CLI, "api", "--port", "1"], env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "PROVIDER_WEBHOOK_SECRET" in lines[0], result.stderr
        assert "Traceback" not in result.stderr


async def test_merchants_create_prints_a_working_key_once(
    app: FastAPI, api_settings: Settings
) -> None:
    result = await asyncio.to_thread(
        subprocess.run,
        [*CLI, "merchants", "create", "Acme"],
        env=server_env(api_settings),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    values = dict(line.split("=", 1) for line in result.stdout.strip().splitlines())
    assert set(values) == {"merchant_id", "api_key", "webhook_secret"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get("/health", headers={"X-API-Key": values["api_key"]})
    assert response.status_code == 200
    async with app.state.api.pool.acquire() as conn:
        stored = await conn.fetchrow(
            "SELECT key_hash, name, scope FROM api_keys WHERE merchant_id = $1::uuid",
            values["merchant_id"],
        )
    assert stored["key_hash"] != values["api_key"] and len(stored["key_hash"]) == 64
    assert (stored["name"], stored["scope"]) == ("default", "write")
    assert re.fullmatch(r"pf_live_[A-Za-z0-9_-]{43}", values["api_key"])


@pytest.mark.slow
async def test_migration_0003_downgrades_and_upgrades(migration_url: str) -> None:
    # Migrations run as the owner role, as `payflow migrate` runs them.
    await asyncio.to_thread(
        lambda: migrate.downgrade(migration_url, "0002_payments_outbox", owner_role=OWNER_ROLE)
    )
    conn = await asyncpg.connect(migration_url)
    try:
        tables = await conn.fetchval(
            "SELECT count(*) FROM pg_tables WHERE tablename = ANY($1::text[])",
            ["api_idempotency", "deposit_addresses", "unmatched_provider_events"],
        )
        assert tables == 0
    finally:
        await conn.close()
    await asyncio.to_thread(lambda: migrate.upgrade(migration_url, owner_role=OWNER_ROLE))
    conn = await asyncpg.connect(migration_url)
    try:
        constraints = {
            row["conname"]
            for row in await conn.fetch(
                "SELECT conname FROM pg_constraint WHERE conrelid = ANY(ARRAY["
                "'api_idempotency'::regclass, 'deposit_addresses'::regclass])"
            )
        }
        assert {"api_idempotency_pkey", "deposit_addresses_pkey"} <= constraints
    finally:
        await conn.close()


@pytest.mark.parametrize("command", ["api", "up"])
async def test_a_fiat_currency_without_an_asset_stops_the_api_in_one_line(
    api_settings: Settings, command: str
) -> None:
    """`FIAT_CURRENCIES=USD,GBP,JPY` with no GBP or JPY asset: the API role refuses to
    start, naming the setting and the currencies without an asset, before it serves
    anything (it never serves a GBP payment as a 422 blaming `body.amount`)."""
    env = {**server_env(api_settings), "FIAT_CURRENCIES": "USD,GBP,JPY"}
    args = [*CLI, command, *(["--port", "1"] if command == "api" else [])]
    result = await asyncio.to_thread(
        subprocess.run, args, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "payflow: setting FIAT_CURRENCIES is invalid: no asset GBP, JPY"
        " (add it first, or leave it out)"
    ], result.stderr
