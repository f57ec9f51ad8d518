"""The real API while its database sessions are terminated under it: every answer is
a success, a 4xx or a 503 problem+json with Retry-After; never a 500, never a dropped
connection, and the API answers normally once the terminations stop."""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid

import asyncpg
import httpx

from payflow.config import Settings
from tests.conftest import _url

from .conftest import API_KEY
from .server import running_api

BODY = {"amount": "1.00", "currency": "USD", "description": "lost", "metadata": {}}


def _terminator(database: str, stop: threading.Event) -> None:
    async def run() -> None:
        admin = await asyncpg.connect(_url("postgres"))
        try:
            while not stop.is_set():
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = $1 AND pid <> pg_backend_pid()",
                    database,
                )
                await asyncio.sleep(0.01)
        finally:
            await admin.close()

    asyncio.run(run())


def _sign_in(client: httpx.Client) -> None:
    form = client.get("/console/signin")
    match = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    assert match, form.text[:500]
    done = client.post("/console/signin", data={"csrf_token": match[1], "api_key": API_KEY})
    assert done.status_code in (302, 303), done.text[:300]
    assert client.get("/console").status_code == 200


def test_api_answers_503_never_500_while_sessions_are_terminated(
    api_settings: Settings, database_name: str
) -> None:
    headers = {"X-API-Key": API_KEY}
    bad: list[tuple[str, int, str]] = []
    seen: set[int] = set()
    with running_api(api_settings, workers=1) as base, httpx.Client(base_url=base) as client:
        created = client.post(
            "/api/v1/payments", json=BODY, headers={**headers, "Idempotency-Key": "seed"}
        ).json()
        paths = [
            ("GET", f"/api/v1/payments/{created['payment_id']}"),
            ("GET", "/api/v1/payments"),
            ("GET", "/health"),
            ("GET", "/health/ready"),
            ("GET", "/api/v1/accounts"),
            ("GET", "/api/v1/events"),
            ("POST", "/api/v1/payments"),
            ("GET", "/console"),
            ("GET", "/console/payments"),
            ("GET", "/console/accounts"),
        ]
        _sign_in(client)
        stop = threading.Event()
        killer = threading.Thread(target=_terminator, args=(database_name, stop))
        killer.start()
        try:
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline:
                for method, path in paths:
                    extra = {"Idempotency-Key": uuid.uuid4().hex} if method == "POST" else {}
                    response = client.request(
                        method,
                        path,
                        headers={**headers, **extra},
                        json=BODY if method == "POST" else None,
                    )
                    seen.add(response.status_code)
                    problem = response.headers["content-type"].startswith(
                        "application/problem+json"
                    ) or path.startswith("/console")
                    ok = response.status_code < 500 or (response.status_code == 503 and problem)
                    if not ok:
                        bad.append((path, response.status_code, response.text[:200]))
        finally:
            stop.set()
            killer.join()
        after = client.get(f"/api/v1/payments/{created['payment_id']}", headers=headers)
    assert not bad, bad[:10]
    assert 503 in seen, seen
    assert after.status_code == 200
