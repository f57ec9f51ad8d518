"""Deeply nested JSON against the real `payflow api` process: a clear 422, never a
500 or a dead process. The API process imports eth-account, whose py_ecc raises the
recursion limit to 100,000, so the standard decoder alone would overflow the C stack
on a body of a million `[` (the provider webhook accepts 2 MB)."""

from __future__ import annotations

import httpx
import pytest

from .conftest import ADMIN_KEY, signed

PROVIDER = "/api/v1/webhooks/provider"


def nested(depth: int, prefix: bytes = b"") -> bytes:
    """`prefix` opens an array that holds the nested part; a lone surrogate in it sends
    the body past orjson to the standard decoder."""
    inner = b"[" * depth + b"]" * depth
    return b"[" + prefix + inner + b"]" if prefix else inner


def _json_operations(base: str) -> list[tuple[str, str]]:
    spec = httpx.get(f"{base}/openapi.json").json()
    found = []
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            content = operation.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                url = path.replace("{", "").replace("}", "")  # ids become words: 4xx anyway
                found.append((method.upper(), url))
    return found


def send_to_every_json_operation(
    base: str, body: bytes, idempotency_key: str
) -> list[tuple[str, str, httpx.Response]]:
    """`body` as the JSON body of every operation that takes one (the provider webhook
    aside: it is signed), with the admin key; each (method, path, response)."""
    operations = _json_operations(base)
    assert len(operations) >= 5
    answers = []
    for method, path in operations:
        if path == PROVIDER:
            continue
        response = httpx.request(
            method,
            f"{base}{path}",
            content=body,
            headers={
                "X-API-Key": ADMIN_KEY,
                "Content-Type": "application/json",
                "Idempotency-Key": idempotency_key,
            },
            timeout=30,
        )
        answers.append((method, path, response))
    return answers


def _alive(base: str) -> None:
    response = httpx.get(f"{base}/health", headers={"X-API-Key": ADMIN_KEY}, timeout=10)
    assert response.status_code == 200


@pytest.mark.parametrize("prefix", [b"", b'"\\ud800", '], ids=["orjson", "stdlib"])
def test_every_json_operation_refuses_deep_nesting_with_a_problem(
    live_api: str, prefix: bytes
) -> None:
    for depth in (1025, 30_000):  # 60 KB: inside the API's 64 KB body limit
        body = nested(depth, prefix)
        for method, path, response in send_to_every_json_operation(live_api, body, f"deep-{depth}"):
            assert 400 <= response.status_code < 500, (method, path, response.text[:300])
            assert response.headers["content-type"].startswith("application/problem+json")
    _alive(live_api)


@pytest.mark.parametrize("prefix", [b"", b'"\\ud800", '], ids=["orjson", "stdlib"])
def test_provider_webhook_refuses_deep_nesting_and_keeps_serving(
    live_api: str, prefix: bytes
) -> None:
    for depth in (1025, 1_000_000):  # 2 MB: the provider body limit
        body = nested(depth, prefix)
        response = httpx.post(f"{live_api}{PROVIDER}", content=body, headers=signed(body))
        assert response.status_code == 422, response.text[:300]
        assert response.json()["detail"] == "body: is not valid JSON"
        _alive(live_api)
    # Within the bound the delivery is JSON: kept for review, not refused.
    body = b'{"event_id": "deep", "nested": ' + nested(900, prefix) + b"}"
    response = httpx.post(f"{live_api}{PROVIDER}", content=body, headers=signed(body))
    assert response.status_code == 202, response.text[:300]
    assert response.json()["events"][0]["result"] == "unmatched"
