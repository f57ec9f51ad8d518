"""`payflow relay` and `payflow worker` as OS processes configured from the environment
the way an operator would behind pgbouncer: DATABASE_URL through it,
DB_STATEMENT_CACHE_SIZE=0 and DATABASE_DIRECT_URL for the relay's LISTEN."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import uuid
from decimal import Decimal
from pathlib import Path

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from payflow_lab.supervisor import spawn_payflow
from tests.integration.support import START_LIMIT_S, wait_until

ROOT = Path(__file__).resolve().parents[4]

pytestmark = pytest.mark.slow


def _spawn(settings: Settings, role: str, log_path: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=settings.database_url,
        DATABASE_DIRECT_URL=settings.direct_url(),
        DB_STATEMENT_CACHE_SIZE="0",
        RABBITMQ_URL=settings.rabbitmq_url,
        REDIS_KEY_PREFIX=settings.redis_key_prefix,
        RETRY_TIERS_MS=",".join(str(t) for t in settings.retry_tiers_ms),
        GATEWAY_DELAY_MIN_S="0",
        GATEWAY_DELAY_MAX_S="0",
        GATEWAY_FAILURE_RATE="0",
        WEBHOOK_ALLOW_HOSTS="127.0.0.1",
        # Only a NOTIFY on the direct URL can wake the relay within the test's limits.
        RELAY_POLL_INTERVAL_S="120",
        LOG_JSON="false",
        DB_POOL_MIN="1",
        DB_POOL_MAX="4",
    )
    return spawn_payflow([role], env, log_path, cwd=ROOT)


async def test_relay_and_worker_processes_configured_for_pgbouncer(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    tmp_path: Path,
) -> None:
    async with pool.acquire() as conn, transaction(conn, pipe_settings):
        account = (await create_account(conn, "USD", Decimal(0))).id
    procs = {
        role: _spawn(pipe_settings, role, tmp_path / f"{role}.log") for role in ("relay", "worker")
    }
    try:
        await wait_until(
            lambda: asyncio.to_thread(
                lambda: "payflow.outbox.relay_started" in (tmp_path / "relay.log").read_text()
            ),
            limit_s=START_LIMIT_S,
            what="the relay process started",
        )
        payment = await submitter.submit_payment(merchant[0], "9.99", "USD", "k-proc", sink.url)
        for index in range(4):
            await submitter.submit_deposit(f"proc-dep-{index}", account, "0.25")
        await wait_until(
            lambda: pool.fetchval(
                "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment
            ),
            limit_s=60,
            what="payment processed and notified",
        )
        await wait_until(
            lambda: pool.fetchval(
                "SELECT count(*) = 0 FROM payment_events WHERE status <> 'confirmed'"
            ),
            limit_s=60,
            what="every event posted",
        )
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        codes = {role: await asyncio.to_thread(p.wait, 60) for role, p in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)  # reaped: no process outlives its test
    logs = {role: (tmp_path / f"{role}.log").read_text() for role in procs}
    assert codes == {"relay": 0, "worker": 0}, logs
    assert "does not exist" not in logs["worker"] + logs["relay"]
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account) == Decimal(
        "1.00"
    )
    assert await pool.fetchval(
        "SELECT balance FROM accounts WHERE merchant_id = $1", merchant[0]
    ) == Decimal("9.99")
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 5
    assert len(sink.received) == 1
