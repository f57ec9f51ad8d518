"""The client side of the multi-process tests; imports little so spawning is cheap."""

from __future__ import annotations

from typing import Any

import httpx


def post_after_barrier(args: tuple[str, str, str, dict[str, Any], Any]) -> tuple[int, str]:
    """Connect, wait for every sibling at the barrier, then send one POST."""
    base, api_key, idempotency_key, body, barrier = args
    with httpx.Client(base_url=base, timeout=30) as client:
        client.get("/health", headers={"X-API-Key": api_key})  # connect before the barrier
        barrier.wait()
        response = client.post(
            "/api/v1/payments",
            json=body,
            headers={"X-API-Key": api_key, "Idempotency-Key": idempotency_key},
        )
        return response.status_code, response.text
