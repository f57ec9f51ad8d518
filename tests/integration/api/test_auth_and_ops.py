"""X-API-Key on every endpoint, admin-only routes, rate limits, health, ready, metrics."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from payflow.app import create_app
from payflow.config import SettingsError, load_settings

from .conftest import API_KEY

PROTECTED = [
    ("GET", "/health"),
    ("GET", "/ready"),
    ("GET", "/metrics"),
    ("GET", "/api/v1/payments"),
    ("POST", "/api/v1/payments"),
    ("POST", "/api/v1/accounts"),
    ("GET", "/api/v1/events/abc"),
]


@pytest.mark.parametrize(("method", "path"), PROTECTED)
async def test_missing_or_wrong_key_is_401(anon: httpx.AsyncClient, method: str, path: str) -> None:
    for headers in ({}, {"X-API-Key": "wrong"}, {"X-API-Key": ""}):
        response = await anon.request(method, path, headers=headers, json={})
        assert response.status_code == 401, (headers, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["status"] == 401


async def test_non_ascii_key_is_401_not_500(anon: httpx.AsyncClient) -> None:
    for raw in ("ключ".encode(), b"\xff\xfe", API_KEY.encode() + b"\xc3\xa9"):
        response = await anon.get("/health", headers=[(b"X-API-Key", raw)])
        assert response.status_code == 401


async def test_health_with_key(client: httpx.AsyncClient) -> None:
    response = await client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_ready_checks_every_dependency(client: httpx.AsyncClient) -> None:
    response = await client.get("/ready")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "status": "ready",
        "checks": {"postgres": "ok", "redis": "ok", "rabbitmq": "ok"},
    }


async def test_ready_reports_a_dead_dependency(api_settings: Any) -> None:
    settings = api_settings.model_copy(update={"rabbitmq_url": "amqp://guest:guest@127.0.0.1:1/"})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await client.get("/ready", headers={"X-API-Key": API_KEY})
    assert response.status_code == 503
    assert response.json()["checks"]["rabbitmq"].startswith("error")
    assert response.json()["checks"]["postgres"] == "ok"


async def test_metrics_count_by_route_template_and_status(client: httpx.AsyncClient) -> None:
    await client.get("/api/v1/payments/00000000-0000-0000-0000-000000000000")
    text = (await client.get("/metrics")).text
    assert (
        'payflow_http_requests_total{method="GET",route="/api/v1/payments/{payment_id}",'
        'status="404"} 1.0'
    ) in text
    assert "payflow_http_request_duration_seconds_bucket" in text


async def test_admin_routes_refuse_merchant_keys(client: httpx.AsyncClient) -> None:
    account = (await client.post("/api/v1/accounts", json={"asset": "USDC"})).json()
    response = await client.post(
        f"/api/v1/accounts/{account['account_id']}/deposit-addresses",
        json={"chain": "ETH_MAINNET", "address": "0x" + "1" * 40},
    )
    assert response.status_code == 403


async def test_rate_limit_answers_429_with_retry_after(api_settings: Any) -> None:
    settings = api_settings.model_copy(update={"rate_limit_per_minute": 3})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers={"X-API-Key": API_KEY}
        ) as client:
            statuses = [(await client.get("/health")).status_code for _ in range(5)]
            limited = await client.get("/health")
    assert statuses == [200, 200, 200, 429, 429]
    assert limited.headers["content-type"] == "application/problem+json"
    assert 1 <= int(limited.headers["retry-after"]) <= 61


def test_short_or_missing_provider_secret_stops_startup() -> None:
    with pytest.raises(SettingsError, match="PROVIDER_WEBHOOK_SECRET"):
        create_app(load_settings(provider_webhook_secret=None))
    with pytest.raises(SettingsError, match="PROVIDER_WEBHOOK_SECRET"):
        load_settings(provider_webhook_secret="short")


async def test_unknown_route_is_a_problem(client: httpx.AsyncClient) -> None:
    response = await client.get("/nope")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


async def test_request_id_is_echoed(client: httpx.AsyncClient) -> None:
    response = await client.get("/health", headers={"X-Request-ID": "trace-abc.1"})
    assert response.headers["x-request-id"] == "trace-abc.1"
    generated = await client.get("/health", headers={"X-Request-ID": "bad id with spaces"})
    assert generated.headers["x-request-id"] != "bad id with spaces"


async def test_exhausted_pool_answers_503_not_500(
    app: Any, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payflow.api import db

    monkeypatch.setattr(db, "ACQUIRE_TIMEOUT_SECONDS", 0.2)
    pool = app.state.api.pool
    held = [await pool.acquire() for _ in range(pool.get_max_size())]
    try:
        response = await client.get("/api/v1/payments")
    finally:
        for conn in held:
            await pool.release(conn)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert response.headers["content-type"] == "application/problem+json"


async def test_unknown_keys_are_counted_per_address(api_settings: Any) -> None:
    """Keys that resolve to nobody are limited, so they cannot cost a database lookup
    without end: past AUTH_FAILURES_PER_MINUTE an address's unresolved keys are 429 with
    Retry-After; a key it already resolved still works."""
    settings = api_settings.model_copy(update={"auth_failures_per_minute": 3})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            known = await client.get("/health", headers={"X-API-Key": API_KEY})
            statuses = [
                (await client.get("/health", headers={"X-API-Key": f"wrong-{i}"})).status_code
                for i in range(5)
            ]
            limited = await client.get("/api/v1/payments", headers={"X-API-Key": "wrong-x"})
            still = await client.get("/health", headers={"X-API-Key": API_KEY})
    assert known.status_code == 200
    assert statuses == [401, 401, 401, 429, 429]
    assert limited.status_code == 429
    assert limited.headers["content-type"] == "application/problem+json"
    assert 1 <= int(limited.headers["retry-after"]) <= 61
    assert still.status_code == 200


@pytest.mark.parametrize(("method", "path"), [("POST", "/api/v1/payments/"), ("GET", "/health/")])
async def test_a_trailing_slash_is_not_redirected_to_the_callers_host(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    """Starlette's slash redirect builds its Location from the Host header, before auth:
    `Host: evil.example` must get a 404, never a 307 to http://evil.example/...."""
    answer = await client.request(method, path, headers={"Host": "evil.example"}, json={})
    assert answer.status_code == 404
    assert "location" not in answer.headers
    assert answer.headers["content-type"] == "application/problem+json"


async def test_whitespace_around_the_key_is_not_part_of_it(anon: httpx.AsyncClient) -> None:
    """RFC 9110 §5.5, as for Idempotency-Key: leading and trailing spaces and tabs are
    stripped alike, so a trailing space or tab must not answer 401."""
    for raw in (f" {API_KEY}", f"{API_KEY} ", f"{API_KEY}\t", f"\t {API_KEY} \t"):
        answer = await anon.get("/health", headers=[(b"X-API-Key", raw.encode())])
        assert answer.status_code == 200, (raw, answer.text)
    for raw in (" ", "\t", f"{API_KEY[:5]} {API_KEY[5:]}"):
        answer = await anon.get("/health", headers=[(b"X-API-Key", raw.encode())])
        assert answer.status_code == 401, (raw, answer.text)


@pytest.mark.parametrize(
    "query",
    ["limit=1&limit=2", "status=pending&status=failed", "cursor=a&cursor=b&limit=3"],
)
async def test_a_query_parameter_given_twice_is_a_422_naming_it(
    client: httpx.AsyncClient, query: str
) -> None:
    """`limit=1&limit=2` and `status=pending&status=failed` are refused, never resolved
    by silently using one of the copies."""
    answer = await client.get(f"/api/v1/payments?{query}")
    assert answer.status_code == 422, answer.text
    name = query.split("=")[0]
    assert answer.json()["errors"][0]["field"] == f"query.{name}"


@pytest.mark.parametrize(
    ("label", "status"),
    [
        ("text/plain", 415),
        ("application/xml", 415),
        ("application/json; charset=utf-16", 415),
        ("multipart/form-data", 415),
        ("application/json", 202),
        ("application/json; charset=UTF-8", 202),
        ("application/problem+json", 202),
    ],
)
async def test_a_body_labelled_as_not_json_is_a_415(
    client: httpx.AsyncClient, label: str, status: int
) -> None:
    """`text/plain` with a JSON body must answer 415, not a puzzling 422 "Input should be
    a valid dictionary", and `charset=utf-16` must not be taken as UTF-8. Nothing is
    written for a refused body; JSON labels are read."""
    body = b'{"amount": "1.00", "currency": "USD"}'
    answer = await client.post(
        "/api/v1/payments",
        content=body,
        headers={"Content-Type": label, "Idempotency-Key": uuid.uuid4().hex},
    )
    assert answer.status_code == status, answer.text
    listed = (await client.get("/api/v1/payments")).json()["items"]
    assert len(listed) == (1 if status == 202 else 0)
    if status == 415:
        assert answer.headers["content-type"] == "application/problem+json"
        assert "application/json" in answer.json()["detail"]


async def test_headers_that_must_come_once_are_never_judged_by_their_first_copy(
    client: httpx.AsyncClient,
) -> None:
    """Two Content-Type headers are refused in either order, never judged by the first
    (201 in one order, 422 in the other), and of two X-Request-ID headers neither is
    echoed as the request's id."""
    for labels in (
        ["application/json", "application/xml"],
        ["application/xml", "application/json"],
    ):
        answer = await client.post(
            "/api/v1/accounts",
            content=b'{"asset": "USD"}',
            headers=[("Content-Type", label) for label in labels],
        )
        assert answer.status_code == 415, (labels, answer.text)
    echoed = await client.get(
        "/health", headers=[("X-Request-ID", "first-id"), ("X-Request-ID", "second-id")]
    )
    assert echoed.headers["x-request-id"] not in ("first-id", "second-id")
