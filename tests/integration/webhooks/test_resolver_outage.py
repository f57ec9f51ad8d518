"""A resolver outage is not a reason to dead-letter a webhook.

A name that does not resolve is retryable, like a refused connection, never
`UnsafeWebhookUrl` (BadInput, final): a webhook due during a DNS outage is retried and
delivered once the name answers, not dead-lettered at its first attempt with no retry
and no sweep (the sweep skips dead-lettered webhooks)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest

from payflow.config import Settings
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.fake_dns import FAIL, FakeDns
from tests.integration.support import wait_until

NAME = "hooks.outage.test"


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    return FakeDns(monkeypatch)


async def _pay_to_the_name(
    pool: asyncpg.Pool,
    settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles: Any,
    until: str,
) -> uuid.UUID:
    """Run the roles with NAME allowed, submit one payment whose webhook goes to NAME and
    wait until `until` (a boolean SQL expression over the payment row) holds."""
    running = await start_roles(
        settings=settings.model_copy(update={"webhook_allow_hosts": (NAME,)})
    )
    url = f"http://{NAME}:{sink.port}/hook"
    payment_id = await submitter.submit_payment(
        merchant[0], "2.00", "EUR", f"k-{uuid.uuid4().hex[:8]}", url
    )
    await wait_until(
        lambda: pool.fetchval(f"SELECT {until} FROM payments WHERE id = $1", payment_id),
        what=until,
    )
    await running.stop()
    return payment_id


async def test_a_name_that_fails_to_resolve_once_is_retried_and_delivered(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    fake_dns: FakeDns,
    start_roles,
) -> None:
    fake_dns.answer(NAME, [FAIL], [FAIL], ["127.0.0.1"])  # two failed lookups, then an answer
    payment_id = await _pay_to_the_name(
        pool,
        pipe_settings,
        submitter,
        merchant,
        sink,
        start_roles,
        "webhook_delivered_at IS NOT NULL",
    )
    payment = await pool.fetchrow(
        "SELECT webhook_attempts, webhook_dead_at FROM payments WHERE id = $1", payment_id
    )
    assert payment["webhook_attempts"] == 1  # only the POST counts; failed lookups sent nothing
    assert payment["webhook_dead_at"] is None
    assert len(sink.received) == 1
    assert fake_dns.lookups[NAME] == 3
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0


async def test_a_name_that_never_resolves_is_dead_lettered_with_its_tries(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    fake_dns: FakeDns,
    start_roles,
) -> None:
    """No POST is ever sent, so the payment counts no attempt, but the dead letter says
    how often the job was tried: once plus each retry tier."""
    fake_dns.answer(NAME, [FAIL])
    payment_id = await _pay_to_the_name(
        pool, pipe_settings, submitter, merchant, sink, start_roles, "webhook_dead_at IS NOT NULL"
    )
    rows = await pool.fetch(
        "SELECT subject_id, attempt FROM dead_letter_queue WHERE source = 'webhook'"
    )
    tries = 1 + len(pipe_settings.retry_tiers_ms)
    assert [(r["subject_id"], r["attempt"]) for r in rows] == [(str(payment_id), tries)]
    assert fake_dns.lookups[NAME] >= tries
    assert sink.received == []
    attempts = await pool.fetchval(
        "SELECT webhook_attempts FROM payments WHERE id = $1", payment_id
    )
    assert attempts == 0
