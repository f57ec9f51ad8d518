"""A job published without a trace (an outbox row written before tracing, or by a path
that lost it) is still handled under its subject's stored trace id: the webhook sender
logs it and sends it to the merchant in `traceparent`."""

from __future__ import annotations

import re
import uuid

import asyncpg
import structlog

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.payments.finalize import SUCCEEDED, finalize
from payflow.payments.records import load_payment
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.support import wait_until

OUTBOUND = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01")


async def test_webhook_job_without_trace_is_sent_under_the_payments_trace(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    merchant_id, _secret = merchant
    payment_id = await submitter.submit_payment(merchant_id, "3.00", "RUB", "o-1", sink.url)
    async with pool.acquire() as conn, transaction(conn, pipe_settings):
        payment = await load_payment(conn, payment_id)
        assert await finalize(conn, payment, SUCCEEDED, None)
    trace = payment["trace_id"]
    # Every job loses its trace, as a row written before tracing would have none.
    await pool.execute("UPDATE outbox SET trace_id = NULL")

    with structlog.testing.capture_logs(
        processors=[structlog.contextvars.merge_contextvars]
    ) as logs:
        running = await start_roles(("relay", "worker"), worker_queues=("webhooks",))
        await wait_until(
            lambda: pool.fetchval(
                "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
            ),
            what="webhook delivered",
        )
        await running.stop()

    delivered = [line for line in logs if line["event"] == "payflow.webhooks.delivered"]
    assert [(line["trace_id"], line["payment_id"]) for line in delivered] == [
        (trace, str(payment_id))
    ]
    assert len(sink.received) == 1
    match = OUTBOUND.fullmatch(sink.received[0].headers["traceparent"])
    assert match is not None and match.group(1) == trace
