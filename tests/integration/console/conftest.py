"""Console fixtures: the API app in process on its own database, three merchants (a shop,
another shop, an operator) and a way to sign a browser-like client in through the form."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from uuid import UUID

import httpx
import pytest
from fastapi import FastAPI

from payflow.api.auth import create_merchant
from payflow.app import create_app
from payflow.config import Settings
from tests.integration.api.conftest import (  # noqa: F401 - fixtures by name
    api_settings,
    redis_cleanup,
    redis_prefix,
)

BASE = "http://payflow.test"


@dataclass(frozen=True, slots=True)
class Merchants:
    shop: str
    shop_id: UUID
    other: str
    admin: str


@pytest.fixture
def console_settings(api_settings: Settings) -> Settings:  # noqa: F811 - the fixture
    # Stuck after 0 s: every unmined payout transaction shows in the admin's stuck list.
    return api_settings.model_copy(update={"payout_stuck_after_s": 0.0, "console_page_size": 5})


@pytest.fixture
async def console_app(console_settings: Settings) -> AsyncIterator[FastAPI]:
    app = create_app(console_settings)
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
async def merchants(console_app: FastAPI) -> Merchants:
    async with console_app.state.api.pool.acquire() as conn:
        shop_id, shop, _ = await create_merchant(conn, "shop", admin=False)
        _, other, _ = await create_merchant(conn, "other-shop", admin=False)
        _, admin, _ = await create_merchant(conn, "ops", admin=True)
    return Merchants(shop, shop_id, other, admin)


@pytest.fixture
async def api(console_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A plain API client (each request names its key)."""
    transport = httpx.ASGITransport(app=console_app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield client


@asynccontextmanager
async def signed_in(app: FastAPI, key: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client holding a console session for `key`, signed in through the form."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        form = await client.get("/console/signin")
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert token is not None, form.text
        answer = await client.post(
            "/console/signin", data={"api_key": key, "csrf_token": token.group(1)}
        )
        assert answer.status_code == 303, answer.text
        yield client
