"""Cursors and time filters are the client's text: what they decode to is checked before
it reaches SQL: a cursor holding `0001-01-01T00:00:00+14:00`, or NUL in an unmatched
event's id, must not reach PostgreSQL and come back as the generic 422 "a value payflow
cannot store", naming no field, with `payflow.api.driver_error` logged. Each is a 422
naming `query.cursor` or the filter, and `created_from=0` is not read as seconds since
the epoch."""

from __future__ import annotations

import base64

import httpx
import orjson
import pytest
import structlog

from payflow.api.cursors import listing_digest

LISTINGS = {
    "/api/v1/payments": listing_digest("payments", status=None, created_from=None, created_to=None),
    "/api/v1/admin/unmatched-events": listing_digest("unmatched-events"),
}


def api_cursor(at: str, item_id: str, path: str = "/api/v1/payments") -> str:
    """A cursor as the API writes one (`cursors.encode_cursor`), around any values, for
    `path` listed without filters."""
    raw = orjson.dumps([at, item_id, LISTINGS[path]])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


GOOD_AT = "2026-12-02T10:00:00+00:00"
UUID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
BAD_TIMES = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "2026-12-02T10:00:00"]


def bad_cursors(key: str, path: str) -> list[str]:
    return [
        *(api_cursor(at, key, path) for at in BAD_TIMES),
        api_cursor(GOOD_AT, "a\x00b", path),
        base64.urlsafe_b64encode(b'["2026-12-02T10:00:00+00:00", 5]').decode(),
        base64.urlsafe_b64encode(b'[5, "x"]').decode(),
    ]


@pytest.mark.parametrize(
    ("path", "who", "key"),
    [("/api/v1/payments", "client", UUID), ("/api/v1/admin/unmatched-events", "admin", "e-1")],
)
async def test_a_cursor_is_checked_before_sql(
    client: httpx.AsyncClient, admin: httpx.AsyncClient, path: str, who: str, key: str
) -> None:
    caller = admin if who == "admin" else client
    good = await caller.get(path, params={"cursor": api_cursor(GOOD_AT, key, path)})
    assert good.status_code == 200, good.text
    with structlog.testing.capture_logs() as logs:
        for cursor in bad_cursors(key, path):
            answer = await caller.get(path, params={"cursor": cursor})
            assert answer.status_code == 422, (cursor, answer.text)
            assert answer.json()["errors"][0]["field"] == "query.cursor", answer.text
    assert not [line for line in logs if line["event"] == "payflow.api.driver_error"]


@pytest.mark.parametrize(
    "value",
    ["0", "99999999999", "1733133600.5", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"],
)
async def test_a_time_filter_is_rfc3339_within_the_stored_range(
    client: httpx.AsyncClient, value: str
) -> None:
    with structlog.testing.capture_logs() as logs:
        for name in ("created_from", "created_to"):
            answer = await client.get("/api/v1/payments", params={name: value})
            assert answer.status_code == 422, (name, value, answer.text)
            fields = [error["field"] for error in answer.json()["errors"]]
            assert any(name in field for field in fields), fields
    assert not [line for line in logs if line["event"] == "payflow.api.driver_error"]
    fine = await client.get("/api/v1/payments", params={"created_from": "2026-12-02T10:00:00Z"})
    assert fine.status_code == 200, fine.text
