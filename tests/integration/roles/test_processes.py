"""Real OS processes: a worker SIGKILLed mid-flight, a graceful SIGTERM, and a broker
connection loss that the roles survive on their own."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import uuid
from pathlib import Path

import asyncpg

from payflow.config import Settings
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.support import rabbitmqctl, wait_until
from tests.processes import spawn_role


def _spawn_worker(
    settings: Settings, log_path: Path, gateway_delay_s: float, charge_lease_s: float
) -> subprocess.Popen[bytes]:
    """A worker process; its charge lease must outlast its gateway delay (the gateway call
    is bounded by the lease), and a redelivery's retry tiers must outlast the lease."""
    return spawn_role(
        settings,
        log_path,
        "worker",
        "--queues",
        "payments",
        GATEWAY_DELAY_MIN_S=str(gateway_delay_s),
        GATEWAY_DELAY_MAX_S=str(gateway_delay_s),
        GATEWAY_FAILURE_RATE="0",
        CHARGE_LEASE_S=str(charge_lease_s),
        LOG_LEVEL="DEBUG",
    )


async def _wait_in_flight(log_path: Path, proc: subprocess.Popen[bytes]) -> None:
    async def in_flight() -> bool:
        assert proc.poll() is None, "worker exited early"
        return "payflow.payments.charging" in await asyncio.to_thread(log_path.read_text)

    await wait_until(in_flight, what="the payment message to be in flight on the worker")


async def test_worker_killed_mid_flight_is_redelivered_and_applied_once(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    vhost: str,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
    tmp_path: Path,
) -> None:
    relay = await start_roles(("relay",))
    payment_id = await submitter.submit_payment(merchant[0], "4.00", "USD", "k-kill", sink.url)
    log_path = tmp_path / "worker.log"
    # Killed while the gateway holds its charge: the claim's 2 s lease keeps the
    # redelivery away until it expires, then the redelivery asks the gateway and finishes.
    proc = _spawn_worker(pipe_settings, log_path, gateway_delay_s=30, charge_lease_s=2)
    try:
        await _wait_in_flight(log_path, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    patient = pipe_settings.model_copy(
        update={"retry_tiers_ms": (1000, 2000, 4000), "charge_lease_s": 2.0}
    )
    worker = await start_roles(("worker",), settings=patient)
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="delivery after redelivery",
    )
    await wait_until(
        lambda: pool.fetchval("SELECT count(*) = 1 FROM balance_events"), what="credit"
    )
    await worker.stop()
    await relay.stop()
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 1
    assert len(sink.received) == 1


async def test_sigterm_finishes_in_flight_work_and_exits_zero(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    vhost: str,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
    tmp_path: Path,
) -> None:
    relay = await start_roles(("relay",))
    payment_id = await submitter.submit_payment(merchant[0], "4.00", "USD", "k-term", sink.url)
    log_path = tmp_path / "worker.log"
    proc = _spawn_worker(pipe_settings, log_path, gateway_delay_s=3, charge_lease_s=10)
    try:
        await _wait_in_flight(log_path, proc)
        proc.send_signal(signal.SIGTERM)
        returncode = await asyncio.to_thread(proc.wait, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)  # reaped: no process outlives its test
    await relay.stop()
    assert returncode == 0, log_path.read_text()
    # The message in flight was finished (not abandoned) before the process exited.
    status = await pool.fetchval("SELECT status FROM payments WHERE id = $1", payment_id)
    assert status == "succeeded", log_path.read_text()
    log = log_path.read_text()
    assert log.index("payflow.payments.finalized") < log.index("payflow.consumer.stopped")


async def test_roles_reconnect_after_the_broker_drops_their_connections(
    pool: asyncpg.Pool,
    vhost: str,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    running = await start_roles()
    first = await submitter.submit_payment(merchant[0], "1.00", "USD", "k-before", sink.url)

    def delivered(payment_id: uuid.UUID):  # type: ignore[no-untyped-def]
        return lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        )

    await wait_until(delivered(first), what="first delivery")
    await asyncio.to_thread(rabbitmqctl, "close_all_connections", "--vhost", vhost, "test: drop")
    second = await submitter.submit_payment(merchant[0], "1.00", "USD", "k-after", sink.url)
    await wait_until(delivered(second), what="delivery after reconnect", limit_s=60)
    await running.stop()
    assert len(sink.received) == 2
