"""`payflow merchants keys create|list|revoke`: an operator's keys work over HTTP, the
list shows every merchant's keys without secrets, revocation is a 401 and the last write
key needs --force; bad arguments are one line and exit 2, before anything runs."""

from __future__ import annotations

import asyncio
import re
import subprocess
import uuid

import httpx
from fastapi import FastAPI

from payflow.config import Settings
from tests.processes import PAYFLOW_MAIN

from .server import server_env


async def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [*PAYFLOW_MAIN, "merchants", "keys", *args],
        env=server_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
    )


async def _status(app: FastAPI, key: str, method: str = "GET", path: str = "/health") -> int:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        answer = await client.request(method, path, headers={"X-API-Key": key}, json={})
    return answer.status_code


async def _bootstrap_id(app: FastAPI) -> uuid.UUID:
    async with app.state.api.pool.acquire() as conn:
        merchant: uuid.UUID = await conn.fetchval(
            "SELECT id FROM merchants WHERE name = 'bootstrap'"
        )
    return merchant


async def test_create_list_revoke(app: FastAPI, api_settings: Settings) -> None:
    merchant = await _bootstrap_id(app)
    made = await _cli(
        api_settings, "create", str(merchant), "--name", "reporting", "--scope", "read",
        "--expires-at", "2999-01-01T00:00:00",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    values = dict(line.split("=", 1) for line in made.stdout.strip().splitlines())
    assert re.fullmatch(r"pf_live_[A-Za-z0-9_-]{43}", values["api_key"])
    key, key_id = values["api_key"], values["key_id"]
    assert await _status(app, key) == 200
    assert await _status(app, key, "POST", "/api/v1/api-keys") == 403

    listed = await _cli(api_settings, "list")
    assert listed.returncode == 0, listed.stderr
    assert key not in listed.stdout
    lines = {line.split("\t")[0]: line.split("\t") for line in listed.stdout.splitlines()}
    assert lines[key_id][2:6] == ["bootstrap", "reporting", "read", "active"]
    assert lines[key_id][6] == "..." + key[-4:]
    assert lines[key_id][7] == "expires=2999-01-01T00:00:00Z"
    assert {row[2] for row in lines.values()} == {"bootstrap", "bootstrap-admin"}
    mine = await _cli(api_settings, "list", str(merchant))
    assert {line.split("\t")[2] for line in mine.stdout.splitlines()} == {"bootstrap"}

    revoked = await _cli(api_settings, "revoke", key_id)
    assert revoked.returncode == 0, revoked.stderr
    assert "\trevoked\t" in revoked.stdout
    app.state.api.auth_cache.clear()  # another process: the cache time has passed
    assert await _status(app, key) == 401
    again = await _cli(api_settings, "revoke", key_id)
    assert again.returncode == 0 and "revoked already" in again.stderr


async def test_the_last_write_key_needs_force(app: FastAPI, api_settings: Settings) -> None:
    merchant = await _bootstrap_id(app)
    async with app.state.api.pool.acquire() as conn:
        default = await conn.fetchval(
            "SELECT id FROM api_keys WHERE merchant_id = $1 AND name = 'default'", merchant
        )
    refused = await _cli(api_settings, "revoke", str(default))
    assert refused.returncode == 1
    assert "last active write key" in refused.stderr and "Traceback" not in refused.stderr
    forced = await _cli(api_settings, "revoke", str(default), "--force")
    assert forced.returncode == 0, forced.stderr
    assert "last active write key" in forced.stderr


async def test_bad_arguments_are_one_line(app: FastAPI, api_settings: Settings) -> None:
    merchant = str(await _bootstrap_id(app))
    cases = [
        ("create", merchant, "--name", "x" * 101, "--scope", "read"),
        ("create", merchant, "--name", "ok", "--scope", "admin"),
        ("create", merchant, "--name", "ok", "--scope", "read", "--expires-at", "2001-01-01"),
        ("create", merchant, "--name", "ok", "--scope", "read", "--expires-at", "soon"),
        ("create", "not-a-uuid", "--name", "ok", "--scope", "read"),
        ("revoke", "not-a-uuid"),
    ]
    for args in cases:
        result = await _cli(api_settings, *args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, args
    unknown = await _cli(
        api_settings, "create", str(uuid.uuid4()), "--name", "ok", "--scope", "read"
    )
    assert unknown.returncode == 1 and "does not exist" in unknown.stderr
    gone = await _cli(api_settings, "revoke", str(uuid.uuid4()))
    assert gone.returncode == 1 and "does not exist" in gone.stderr
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM api_keys") == 2  # the bootstraps'
