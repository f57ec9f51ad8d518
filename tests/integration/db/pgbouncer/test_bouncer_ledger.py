"""Through pgbouncer in transaction pooling: the pooler really multiplexes, transactions
keep their isolation and timeouts without leaking, payments are created through the
HTTP API, postings (concurrent ones too) apply exactly once, and reconciliation (hot
and full) reads one snapshot and finds a tampered balance."""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

import asyncpg
import httpx
import pytest

from payflow.config import Settings
from payflow.db.pool import create_pool
from payflow.db.tx import transaction
from payflow.errors import AlreadyProcessed
from payflow.ledger.posting import post_event
from payflow.ledger.recon import reconcile
from payflow.ledger.records import EventType
from tests.integration.db.pgbouncer.bouncer import POOL_SIZE
from tests.integration.db.pgbouncer.workers import post_after_barrier
from tests.integration.ledger.helpers import balance, count, new_account, new_event


async def test_clients_share_few_server_connections(settings: Settings) -> None:
    """More client connections than pgbouncer has servers, each holding its connection:
    they all run, on at most POOL_SIZE backends. Only transaction pooling can do that;
    session pooling would block the extra clients."""
    clients = await asyncio.gather(
        *(
            asyncpg.connect(settings.database_url, statement_cache_size=0)
            for _ in range(3 * POOL_SIZE)
        )
    )
    try:
        pids = set()
        for _ in range(3):
            pids |= set(
                await asyncio.gather(
                    *(conn.fetchval("SELECT pg_backend_pid()") for conn in clients)
                )
            )
        assert 1 <= len(pids) <= POOL_SIZE
        assert await clients[0].fetchval("SELECT inet_server_port()") == 5432
    finally:
        await asyncio.gather(*(conn.close() for conn in clients))


async def test_repeatable_read_holds_one_snapshot_and_leaks_nothing(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    """`transaction(isolation="repeatable read")` opens with BEGIN ISOLATION LEVEL: the
    whole block stays on one backend and one snapshot, and the next transaction on the
    same client connection is back to read committed with the default timeouts."""
    account = await new_account(pool, settings, opening="5")
    async with pool.acquire() as conn:
        async with transaction(conn, settings, isolation="repeatable read", readonly=True):
            first_pid = await conn.fetchval("SELECT pg_backend_pid()")
            assert await conn.fetchval("SHOW transaction_isolation") == "repeatable read"
            assert await conn.fetchval("SHOW lock_timeout") == "2s"
            before = await conn.fetchval("SELECT updated_at FROM accounts WHERE id = $1", account)
            # A concurrent commit from another client, on another server connection (a
            # column the service may write: balances move only by posting, migration 0032).
            async with pool.acquire() as other, transaction(other, settings):
                await other.execute(
                    "UPDATE accounts SET updated_at = updated_at + interval '1 second'"
                    " WHERE id = $1",
                    account,
                )
            assert await conn.fetchval(
                "SELECT updated_at FROM accounts WHERE id = $1", account
            ) == (before)
            assert await conn.fetchval("SELECT pg_backend_pid()") == first_pid
        async with transaction(conn, settings):
            assert await conn.fetchval("SHOW transaction_isolation") == "read committed"
            assert await conn.fetchval(
                "SELECT updated_at FROM accounts WHERE id = $1", account
            ) == before + timedelta(seconds=1)
    # Nothing session-level reached any server connection of the pool.
    for _ in range(2 * POOL_SIZE):
        assert await pool.fetchval("SHOW transaction_isolation") == "read committed"
        assert await pool.fetchval("SHOW statement_timeout") == "0"


async def test_payment_created_through_the_api_once_per_key(
    app: Any, client: httpx.AsyncClient
) -> None:
    body = {"amount": "10.00", "currency": "RUB", "webhook_url": "http://127.0.0.1:9/hook"}
    headers = {"Idempotency-Key": f"order-{uuid.uuid4().hex}"}
    replies = await asyncio.gather(
        *(client.post("/api/v1/payments", json=body, headers=headers) for _ in range(6))
    )
    answered = [r for r in replies if r.status_code == 202]
    assert answered, [r.text for r in replies]
    assert {r.json()["payment_id"] for r in answered} == {answered[0].json()["payment_id"]}
    # A concurrent duplicate may be told to retry (409 in progress), never a 500.
    assert all(r.status_code in (202, 409) for r in replies), [r.text for r in replies]
    again = await client.post("/api/v1/payments", json=body, headers=headers)
    assert again.status_code == 202
    assert again.json()["payment_id"] == answered[0].json()["payment_id"]
    fetched = await client.get(f"/api/v1/payments/{answered[0].json()['payment_id']}")
    assert fetched.status_code == 200
    assert fetched.json()["amount"] == "10.00"
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM payments") == 1
        assert await conn.fetchval("SELECT count(*) FROM api_idempotency") == 1
        assert await conn.fetchval("SELECT count(*) FROM outbox") == 1
    bad = await client.post(
        "/api/v1/payments", json={**body, "amount": "1e400"}, headers={"Idempotency-Key": "k-bad"}
    )
    assert bad.status_code == 422
    assert bad.headers["content-type"] == "application/problem+json"


async def test_concurrent_postings_from_many_connections_apply_once(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    """20 withdrawals of 0.75 from 10 and one deposit delivered 10 times, all at once
    from 12 client connections over POOL_SIZE server connections."""
    account = await new_account(pool, settings, opening="10")
    for index in range(20):
        await new_event(pool, settings, account, f"wd-{index}", "0.75", EventType.WITHDRAWAL)
    await new_event(pool, settings, account, "dup-dep", "0.5", EventType.DEPOSIT)

    async def post(event_id: str) -> str:
        try:
            result = await post_event(pool, settings, event_id)
        except AlreadyProcessed:
            return "already_processed"
        return "replayed" if result.replayed else result.outcome.value

    outcomes = await asyncio.gather(
        *(post(f"wd-{index}") for index in range(20)), *(post("dup-dep") for _ in range(10))
    )
    withdrawals, deposits = outcomes[:20], outcomes[20:]
    assert deposits.count("success") == 1
    assert deposits.count("success") + deposits.count("replayed") == 10
    # 10 + 0.5 allows 14 withdrawals when the deposit lands first, 13 otherwise.
    successes = withdrawals.count("success")
    assert successes + withdrawals.count("insufficient_funds") == 20
    final = await balance(pool, account)
    assert final == Decimal("10.5") - Decimal("0.75") * successes >= 0
    assert await count(pool, "SELECT count(*) FROM balance_events") == successes + 1
    assert await count(pool, "SELECT count(*) FROM processed_events") == 21
    assert await count(
        pool, "SELECT count(*) FROM payment_events WHERE status = 'failed'"
    ) == withdrawals.count("insufficient_funds")
    assert (await reconcile(pool, settings, full=True)).clean


@pytest.mark.slow
async def test_processes_deliver_one_deposit_once(pool: asyncpg.Pool, settings: Settings) -> None:
    """Four OS processes behind a barrier, each with its own pool through pgbouncer."""
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "proc-dep", "0.123456789012345678", EventType.DEPOSIT)
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(4)
        with context.Pool(4) as workers:
            batches = await asyncio.to_thread(
                workers.starmap,
                post_after_barrier,
                [(settings.database_url, ["proc-dep"], barrier)] * 4,
            )
    flat = [outcome for batch in batches for outcome in batch]
    assert sorted(flat) == ["replayed", "replayed", "replayed", "success"]
    assert await balance(pool, account) == Decimal("0.123456789012345678")
    assert await count(pool, "SELECT count(*) FROM balance_events") == 1


async def test_reconciliation_hot_and_full_through_the_bouncer(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    accounts = [await new_account(pool, settings, opening="1") for _ in range(3)]
    for index, account in enumerate(accounts):
        await new_event(pool, settings, account, f"rc-{index}", "2.5", EventType.DEPOSIT)
        await post_event(pool, settings, f"rc-{index}")
    hot = await reconcile(pool, settings, full=False, recent_minutes=settings.recon_recent_minutes)
    full = await reconcile(pool, settings, full=True)
    assert (hot.clean, hot.accounts_checked) == (True, 3)
    assert (full.clean, full.accounts_checked) == (True, 3)

    # A balance changed behind the ledger's back (the app role could not do this).
    await owner_pool.execute(
        "UPDATE accounts SET balance = balance + 0.01 WHERE id = $1", accounts[1]
    )
    for report in (
        await reconcile(pool, settings, full=False, recent_minutes=settings.recon_recent_minutes),
        await reconcile(pool, settings, full=True),
    ):
        assert not report.clean
        assert [(m.account_id, m.balance, m.expected) for m in report.mismatches] == [
            (str(accounts[1]), Decimal("3.51"), Decimal("3.5"))
        ]


@pytest.mark.parametrize("cache_size", [100, 0])
async def test_statement_cache_must_be_off_behind_pgbouncer_1_18(
    settings: Settings, cache_size: int
) -> None:
    """A client's second run of a query lands on another server connection (pgbouncer
    reuses idle servers LIFO, and another client holds the first one). With asyncpg's
    cache on, the named statement prepared on the first server is missing there; with
    DB_STATEMENT_CACHE_SIZE=0 nothing outlives the round trip and the query runs."""
    query = "SELECT count(*) FROM accounts WHERE id <> $1"
    configured = settings.model_copy(update={"db_statement_cache_size": cache_size})
    client = await create_pool(configured, min_size=1, max_size=1)
    other = await asyncpg.connect(settings.database_url, statement_cache_size=0)
    try:
        async with client.acquire() as conn:
            assert await conn.fetchval(query, uuid.uuid4()) == 0
            async with other.transaction():  # holds the server the first run used
                await other.execute("SELECT 1")
                if cache_size:
                    with pytest.raises(asyncpg.InvalidSQLStatementNameError):
                        await conn.fetchval(query, uuid.uuid4())
                else:
                    assert await conn.fetchval(query, uuid.uuid4()) == 0
    finally:
        await client.close()
        await other.close()
