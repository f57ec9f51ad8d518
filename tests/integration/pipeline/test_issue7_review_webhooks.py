"""Issue 7 review: a resolver outage is not a reason to dead-letter a webhook.

`resolve_webhook_url` used to raise `UnsafeWebhookUrl` (BadInput, final) when a name did
not resolve, so every webhook due during a DNS outage was dead-lettered at its first
attempt, with no retry and no sweep (the sweep skips dead-lettered webhooks): the same
class as issue 7 item 4, an outage of a dependency turned into failures. Now a name
without an answer is retryable, like a refused connection."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from payflow.bench.sink import WebhookSink
from payflow.bench.submit import DirectSubmitter
from payflow.config import Settings
from tests.fake_dns import FAIL, FakeDns
from tests.integration.pipeline.conftest import wait_until

NAME = "hooks.outage.test"


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    return FakeDns(monkeypatch)


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
    settings = pipe_settings.model_copy(update={"webhook_allow_hosts": (NAME,)})
    running = await start_roles(settings=settings)
    url = f"http://{NAME}:{sink.port}/hook"
    payment_id = await submitter.submit_payment(merchant[0], "2.00", "EUR", "k-dns", url)
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="delivery after the resolver came back",
    )
    await running.stop()
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
    settings = pipe_settings.model_copy(update={"webhook_allow_hosts": (NAME,)})
    running = await start_roles(settings=settings)
    url = f"http://{NAME}:{sink.port}/hook"
    payment_id = await submitter.submit_payment(merchant[0], "2.00", "EUR", "k-never", url)
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_dead_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="the dead letter after every retry tier",
    )
    await running.stop()
    rows = await pool.fetch(
        "SELECT subject_id, attempt FROM dead_letter_queue WHERE source = 'webhook'"
    )
    tries = 1 + len(settings.retry_tiers_ms)
    assert [(r["subject_id"], r["attempt"]) for r in rows] == [(str(payment_id), tries)]
    assert fake_dns.lookups[NAME] >= tries
    assert sink.received == []
    attempts = await pool.fetchval(
        "SELECT webhook_attempts FROM payments WHERE id = $1", payment_id
    )
    assert attempts == 0
