"""20 identical requests from 20 OS processes, released together by a barrier,
against the API running as in production (uvicorn workers): one payment."""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid

import asyncpg
import httpx
import pytest

from payflow.config import Settings

from .conftest import API_KEY
from .parallel_client import post_after_barrier
from .server import running_api

PARALLEL = 20
BODY = {"amount": "42.00", "currency": "USD", "description": "parallel", "metadata": {}}


@pytest.mark.slow
def test_parallel_identical_requests_create_one_payment(api_settings: Settings) -> None:
    key = f"parallel-{uuid.uuid4().hex}"
    context = multiprocessing.get_context("spawn")
    with running_api(api_settings, workers=2) as base, context.Manager() as manager:
        barrier = manager.Barrier(PARALLEL)
        with context.Pool(PARALLEL) as pool:
            results = pool.map(post_after_barrier, [(base, API_KEY, key, BODY, barrier)] * PARALLEL)
        # A late retry, once everything settled, replays the stored response.
        with httpx.Client(base_url=base) as client:
            late = client.post(
                "/api/v1/payments",
                json=BODY,
                headers={"X-API-Key": API_KEY, "Idempotency-Key": key},
            )
    statuses = sorted(status for status, _ in results)
    assert set(statuses) <= {202, 409}, results
    accepted = {text for status, text in results if status == 202}
    assert len(accepted) == 1, accepted
    assert late.status_code == 202 and late.text in accepted
    assert asyncio.run(_counts(api_settings.database_url)) == (1, 1, 1)


async def _counts(database_url: str) -> tuple[int, int, int]:
    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM payments), (SELECT count(*) FROM outbox),"
            " (SELECT count(*) FROM api_idempotency)"
        )
        assert row is not None
        return (row[0], row[1], row[2])
    finally:
        await conn.close()
