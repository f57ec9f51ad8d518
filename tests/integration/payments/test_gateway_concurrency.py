"""A slow gateway must not cap throughput: gateway calls in flight are bounded
by GATEWAY_MAX_IN_FLIGHT, not by BROKER_PREFETCH nor by the DB pool, and no transaction
stays open while a call waits."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account
from payflow.payments.gateway import ChargeRequest, ChargeResult
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.support import wait_until

HELD = 200  # payments waiting on the gateway at once; far above prefetch 16 and pool 8
DEPOSITS = 20


class HeldGateway:
    """Approves every charge, but only once `release` is set; counts the calls waiting."""

    def __init__(self) -> None:
        self.waiting = 0
        self.release = asyncio.Event()
        self.charged: list[uuid.UUID] = []

    async def charge(self, request: ChargeRequest) -> ChargeResult:
        self.waiting += 1
        try:
            await self.release.wait()
        finally:
            self.waiting -= 1
        self.charged.append(request.payment_id)
        return ChargeResult(approved=True, reference=f"ref-{request.payment_id}")

    async def status(self, payment_id: uuid.UUID) -> ChargeResult | None:
        return None


@pytest.mark.slow
async def test_hundreds_of_payments_wait_on_the_gateway_while_the_ledger_flows(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    start_roles,
) -> None:
    settings = pipe_settings.model_copy(
        update={"gateway_max_in_flight": HELD, "charge_lease_s": 120.0, "broker_prefetch": 16}
    )
    gateway = HeldGateway()
    await start_roles(("relay", "worker"), settings=settings, gateway=gateway)
    for i in range(HELD):
        await submitter.submit_payment(merchant[0], "1.00", "USD", f"k-held-{i}", None)
    await wait_until(
        lambda: asyncio.sleep(0, gateway.waiting == HELD),
        limit_s=90,
        what=f"{HELD} gateway calls waiting at once",
    )
    # Every call is parked: a transaction begun before now and still open would be one
    # held across a gateway call.
    parked_at = await pool.fetchval("SELECT clock_timestamp()")
    app_role = await pool.fetchval("SELECT current_user")
    database = await pool.fetchval("SELECT current_database()")
    open_across_call = await owner_pool.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND usename = $2"
        " AND xact_start < $3",
        database,
        app_role,
        parked_at,
    )
    assert open_across_call == 0

    # The ledger keeps its own slots: deposits confirm while every payment waits.
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "USD", Decimal(0))
    for i in range(DEPOSITS):
        await submitter.submit_deposit(f"held-dep-{i}", account.id, "2.00")
    await wait_until(
        lambda: pool.fetchval(
            "SELECT count(*) = $1 FROM payment_events WHERE event_id LIKE 'held-dep-%'"
            " AND status = 'confirmed'",
            DEPOSITS,
        ),
        limit_s=60,
        what="deposits confirmed while the gateway holds every payment",
    )
    assert gateway.waiting == HELD
    assert await pool.fetchval("SELECT count(*) FROM payments WHERE status = 'pending'") == HELD

    gateway.release.set()
    await wait_until(
        lambda: pool.fetchval(
            "SELECT count(*) = $1 FROM payments WHERE status = 'succeeded'", HELD
        ),
        limit_s=60,
        what="every payment succeeded",
    )
    assert sorted(gateway.charged) == sorted(
        r["id"] for r in await pool.fetch("SELECT id FROM payments")
    )
    assert await pool.fetchval("SELECT count(*) FROM charge_attempts") == HELD
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account.id) == (
        Decimal(2 * DEPOSITS)
    )
