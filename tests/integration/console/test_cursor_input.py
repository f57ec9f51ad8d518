"""A console page link is the client's text: a cursor or a time filter that decodes but
holds what PostgreSQL cannot take (a time outside the stored range, NUL in a key, an id
that is not one) is refused with the console's 400 page before it reaches SQL:
`created_from=0001-01-01T00:00:00+14:00` and cursors with such times or keys must not
log `payflow.api.driver_error`."""

from __future__ import annotations

import base64

import pytest
import structlog
from fastapi import FastAPI

from .conftest import Merchants, signed_in


def page_link(at: str, key: str) -> str:
    """A cursor as the console writes one (`pages._cursor`), around any text."""
    return base64.urlsafe_b64encode(f"{at}|{key}".encode()).decode().rstrip("=")


GOOD_AT = "2026-12-02T10:00:00+00:00"
UUID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
BAD_CURSORS = [
    page_link("0001-01-01T00:00:00+14:00", UUID),  # before year 1 in UTC
    page_link("9999-12-31T23:59:59-14:00", UUID),  # after year 9999 in UTC
    page_link("2026-12-02T10:00:00", UUID),  # no offset: not one the console wrote
    page_link(GOOD_AT, "a\x00b"),
    NOT_AN_ID := page_link(GOOD_AT, "not-an-id"),
    page_link("0001-01-01T00:00:00+14:00", "a\x00b"),
]
TEXT_KEYED = ("/console/events", "/console/unmatched", "/console/deposits")
PAGES = [
    "/console/payments",
    "/console/events",
    "/console/unmatched",
    "/console/deposits",
    "/console/deposits/reports",
    "/console/payouts",
]


@pytest.mark.parametrize("page", PAGES)
async def test_a_damaged_cursor_is_the_400_page(
    console_app: FastAPI, merchants: Merchants, page: str
) -> None:
    async with signed_in(console_app, merchants.admin) as ops:
        with structlog.testing.capture_logs() as logs:
            for cursor in BAD_CURSORS:
                answer = await ops.get(page, params={"cursor": cursor})
                if cursor == NOT_AN_ID and page in TEXT_KEYED:
                    # Their keys are event or transfer ids (any text): a page after it.
                    assert answer.status_code == 200, (page, cursor)
                    continue
                assert answer.status_code == 400, (page, cursor, answer.status_code)
                assert answer.headers["content-type"].startswith("text/html")
        assert not [line for line in logs if line["event"] == "payflow.api.driver_error"]


@pytest.mark.parametrize(
    "value", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "0001-01-01T00:00"]
)
async def test_a_time_filter_outside_the_stored_range_is_the_400_page(
    console_app: FastAPI, merchants: Merchants, value: str
) -> None:
    async with signed_in(console_app, merchants.shop) as shop:
        with structlog.testing.capture_logs() as logs:
            for field in ("created_from", "created_to"):
                answer = await shop.get("/console/payments", params={field: value})
                assert answer.status_code == 400, (field, value, answer.status_code)
                assert "between 1970 and 9998" in answer.text
        assert not [line for line in logs if line["event"] == "payflow.api.driver_error"]
