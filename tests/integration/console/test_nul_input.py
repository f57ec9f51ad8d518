"""NUL in a console URL or form never reaches PostgreSQL: `/console/events/%00`,
`/console/deposits/%00`, `/console/unmatched/%00` and the alert-acknowledge and
DLQ-replay forms with a NUL field must not log `payflow.api.driver_error` SQLSTATE 22021
(which would mean validation missed them). A path id is the unknown-id 404 page; a form
field is a 422 page; nothing changes."""

from __future__ import annotations

import re

import pytest
import structlog
from fastapi import FastAPI

from .conftest import Merchants, signed_in

PATHS = [
    "/console/events/%00",
    "/console/events/a%00b",
    "/console/deposits/%00",
    "/console/unmatched/%00",
    "/console/payouts/%00",
    "/console/payments/%00",
    "/console/accounts/%00",
    "/console/dlq/%00",
]


@pytest.mark.parametrize("admin", [True, False], ids=["admin", "merchant"])
async def test_nul_in_a_path_is_the_unknown_id_page(
    console_app: FastAPI, merchants: Merchants, admin: bool
) -> None:
    key = merchants.admin if admin else merchants.shop
    async with signed_in(console_app, key) as browser:
        with structlog.testing.capture_logs() as logs:
            for path in PATHS:
                answer = await browser.get(path)
                assert answer.status_code in (400, 404), (path, answer.status_code)
        assert not [line for line in logs if line["event"] == "payflow.api.driver_error"]


async def test_nul_in_a_form_is_a_422_page(console_app: FastAPI, merchants: Merchants) -> None:
    async with signed_in(console_app, merchants.admin) as ops:
        token = re.search(r'name="csrf_token" value="([^"]+)"', (await ops.get("/console")).text)
        assert token is not None
        forms = [
            ("/console/alerts/ack", {"key": "a\x00b"}),
            ("/console/dlq/1/replay", {"reason": "why\x00"}),
        ]
        with structlog.testing.capture_logs() as logs:
            for path, fields in forms:
                answer = await ops.post(path, data={**fields, "csrf_token": token.group(1)})
                assert answer.status_code == 422, (path, answer.text)
                assert "NUL character" in answer.text
        assert not [line for line in logs if line["event"] == "payflow.api.driver_error"]
