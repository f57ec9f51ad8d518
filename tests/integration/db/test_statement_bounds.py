"""Every one-statement step is bounded as a whole, table locks included.

Such a statement runs outside a transaction, and what it sets itself (its `lock_timeout`)
applies only once it runs; PostgreSQL takes the statement's table locks before that, while
it parses and plans. A table lock held by someone else (a migration, an operator's
`LOCK TABLE`) must still not hold a pooled connection for ever: `StatementBounds` cancels
the statement after `STATEMENT_TIMEOUT_MS` (`TimeoutError`, retryable), it writes
nothing, and the connection is usable afterwards. (Row locks: test_autocommit_lock_bound.py.)
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from decimal import Decimal

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.tx import StatementBounds
from payflow.errors import RetryableError, classify
from payflow.ledger.posting import post_held_credit, post_in_one_statement
from payflow.payments.charges import claim_first_charge
from payflow.payments.finalize import credit_event_id, finalize_answered
from payflow.payments.gateway import ChargeResult
from payflow.payments.service import NewPayment, create_payment
from payflow.webhooks.sender import WebhookSender, build_http_client
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.payments.test_held_credit import _merchant_with_account
from tests.integration.webhooks.test_webhook_leases import _envelope, _final_payment

SHORT = {"lock_timeout_ms": 300, "statement_timeout_ms": 800}
BOUNDS = StatementBounds(**SHORT)
APPROVED = ChargeResult(approved=True, reference="gw-1")


@asynccontextmanager
async def table_locked(owner_pool: asyncpg.Pool, table: str) -> AsyncIterator[None]:
    """`table` under ACCESS EXCLUSIVE in another session's open transaction."""
    async with owner_pool.acquire() as holder:
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            await transaction.rollback()


async def gives_up(
    conn: asyncpg.Connection,
    step: Awaitable[object],
    expected: type[BaseException] = TimeoutError,
) -> None:
    """The step ends with a retryable error (by default the statement's timeout), well
    before a test's patience runs out."""
    raised = await ended(step)
    assert isinstance(raised, expected), repr(raised)
    assert isinstance(classify(raised), RetryableError)
    assert not conn.is_in_transaction()
    # The client's timeout cancels the statement on the server by a separate request;
    # the next query on `conn` waits for that cancel. Sent while the lock is still held,
    # it makes sure the statement was cancelled, not granted the lock once the test lets
    # go of it (the race `StatementBounds` describes: the step may then commit after all).
    assert await conn.fetchval("SELECT 1") == 1


async def ended(step: Awaitable[object]) -> BaseException | None:
    """What `step` raised; fails the test when it is still waiting after 30 s (an
    unbounded wait: `asyncio.wait_for` would raise a TimeoutError of its own instead)."""
    task = asyncio.ensure_future(step)
    done, _ = await asyncio.wait({task}, timeout=30)
    if not done:
        task.cancel()
        pytest.fail("the step waited for the lock without a bound")
    return task.exception()


async def usable(conn: asyncpg.Connection) -> None:
    assert await conn.fetchval("SELECT 1") == 1
    assert not conn.is_in_transaction()


async def _pending(pool: asyncpg.Pool, settings: Settings, merchant: uuid.UUID) -> uuid.UUID:
    return await DirectSubmitter(pool, settings).submit_payment(
        merchant, "7.50", "USD", uuid.uuid4().hex, None
    )


async def test_api_create(pool: asyncpg.Pool, owner_pool: asyncpg.Pool) -> None:
    merchant, _ = await _merchant_with_account(pool)
    new = NewPayment(Decimal("7.50"), "USD", None, {}, None)
    async with pool.acquire() as conn:
        async with table_locked(owner_pool, "outbox"):
            await gives_up(
                conn,
                create_payment(
                    conn,
                    merchant,
                    new,
                    idempotency_key="k-1",
                    request_hash="h",
                    trace_id="t",
                    bounds=BOUNDS,
                ),
            )
        await usable(conn)
    for table in ("payments", "api_idempotency"):
        count = await pool.fetchval(
            f"SELECT count(*) FROM {table} WHERE merchant_id = $1", merchant
        )
        assert count == 0, table
    assert await pool.fetchval("SELECT count(*) FROM outbox") == 0


async def test_first_charge_claim(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, _ = await _merchant_with_account(pool)
    payment_id = await _pending(pool, settings, merchant)
    async with pool.acquire() as conn:
        async with table_locked(owner_pool, "charge_attempts"):
            await gives_up(conn, claim_first_charge(conn, payment_id, "tok", 30.0, BOUNDS))
        await usable(conn)
    assert await pool.fetchval("SELECT count(*) FROM charge_attempts") == 0


async def test_answer_step(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, _ = await _merchant_with_account(pool)
    payment_id = await _pending(pool, settings, merchant)
    async with pool.acquire() as conn:
        payment, claim = await claim_first_charge(conn, payment_id, "tok", 30.0, BOUNDS)
        assert claim is not None
        async with table_locked(owner_pool, "outbox"):
            await gives_up(conn, finalize_answered(conn, payment, APPROVED, None, bounds=BOUNDS))
        await usable(conn)
    row = await pool.fetchrow(
        "SELECT p.status, a.state FROM payments p JOIN charge_attempts a ON a.payment_id = p.id"
        " WHERE p.id = $1",
        payment_id,
    )
    assert tuple(row) == ("pending", "claimed")


async def _held_credit(
    pool: asyncpg.Pool, settings: Settings
) -> tuple[uuid.UUID, uuid.UUID, str, int]:
    """A succeeded payment whose credit is recorded and held back for its worker:
    (merchant account, payment id, credit event id, held outbox job id)."""
    merchant, account = await _merchant_with_account(pool)
    payment_id = await _pending(pool, settings, merchant)
    async with pool.acquire() as conn:
        payment, _ = await claim_first_charge(conn, payment_id, "tok", 30.0, BOUNDS)
        done = await finalize_answered(
            conn, payment, APPROVED, None, credit_hold_s=30.0, bounds=BOUNDS
        )
    assert done.held_credit is not None
    event_id, held_job = done.held_credit
    return account, payment_id, event_id, held_job


@pytest.mark.parametrize(
    ("table", "expected"),
    [("outbox", TimeoutError), ("balance_events", asyncpg.LockNotAvailableError)],
    ids=["statement's own table", "table of the posting function"],
)
async def test_credit_posting(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    table: str,
    expected: type[BaseException],
) -> None:
    """The posting statement deletes the held job itself (its table is locked while the
    statement is planned: the client-side bound) and calls `ledger_post_success`, whose
    own statements run after it set `lock_timeout` (55P03)."""
    account, payment_id, event_id, held_job = await _held_credit(pool, settings)
    short = settings.model_copy(update=SHORT)
    async with pool.acquire() as conn:
        async with table_locked(owner_pool, table):
            await gives_up(
                conn, post_in_one_statement(conn, short, event_id, held_job=held_job), expected
            )
        await usable(conn)
    assert event_id == credit_event_id(payment_id)
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account) == 0
    assert await pool.fetchval("SELECT count(*) FROM processed_events") == 0
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE id = $1", held_job) == 1


@pytest.mark.parametrize(
    ("table", "posted"),
    [("payments", 0), ("webhook_attempt_log", 1)],
    ids=["claim (payments locked)", "record (attempt log locked)"],
)
async def test_webhook_steps(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    table: str,
    posted: int,
) -> None:
    """The claim gives up before any POST; the record gives up after one, leaving the
    lease to expire (a crash between POST and record, which the design covers)."""
    payment_id = await _final_payment(owner_pool, submitter, merchant[0], sink.url)
    client = build_http_client(pipe_settings)
    try:
        short = pipe_settings.model_copy(update=SHORT)
        sender = WebhookSender(pool, short, client, database=short, pipeline=short, broker=short)
        async with table_locked(owner_pool, table):
            raised = await ended(sender.handle(_envelope(payment_id)))
        assert isinstance(raised, TimeoutError), repr(raised)
    finally:
        await client.aclose()
    assert len(sink.received) == posted
    row = await pool.fetchrow(
        "SELECT webhook_attempts, webhook_delivered_at FROM payments WHERE id = $1", payment_id
    )
    assert tuple(row) == (0, None)
    assert await pool.fetchval("SELECT count(*) FROM webhook_attempt_log") == 0


async def test_held_credit_with_the_outbox_locked_gives_up_and_leaves_the_job(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    """`post_held_credit` never raises: its posting times out, then so does its
    best-effort release of the held job, and it returns None, holding no connection;
    the job stays and the relay publishes it when its hold ends."""
    account, _, event_id, held_job = await _held_credit(pool, settings)
    short = settings.model_copy(update=SHORT)
    async with table_locked(owner_pool, "outbox"):
        # It returns (None: not posted, see the balance below); it never raises.
        assert await ended(post_held_credit(pool, short, event_id, held_job)) is None
    held = await pool.fetchval(
        "SELECT next_attempt_at > now() + interval '10 seconds' FROM outbox WHERE id = $1",
        held_job,
    )
    assert held is True  # not released: the release timed out too, the hold stands
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account) == 0
