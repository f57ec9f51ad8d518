"""What a failover does to a session, on a private database of the real PostgreSQL:
a backend terminated mid-transaction (`pg_terminate_backend` from another session) is
retried by `payflow.retry` and its second attempt commits once; a session that lands on
a node refusing writes (SQLSTATE 25006, as on a standby) is classified retryable and
dropped, so the pool's next session is a fresh one."""

from __future__ import annotations

import asyncpg

from payflow.config import Settings
from payflow.db.pool import create_pool
from payflow.db.tx import transaction
from payflow.errors import RetryableError, classify, is_wrong_node
from payflow.retry import RetryPolicy, RetryStats, retrying
from tests.conftest import _url


async def test_a_backend_terminated_mid_transaction_is_retried_and_commits_once(
    settings: Settings, owner_pool: asyncpg.Pool, database_name: str
) -> None:
    await owner_pool.execute("CREATE TABLE failover_probe (n int PRIMARY KEY)")
    await owner_pool.execute("GRANT SELECT, INSERT ON failover_probe TO PUBLIC")
    pool = await create_pool(settings.database, min_size=1, max_size=2)
    attempts: list[int] = []
    try:

        async def unit_of_work() -> None:
            async with pool.acquire() as conn, transaction(conn, settings.database):
                attempts.append(await conn.fetchval("SELECT pg_backend_pid()"))
                await conn.execute("INSERT INTO failover_probe VALUES (1)")
                if len(attempts) == 1:  # another session ends this one mid-transaction
                    await owner_pool.execute("SELECT pg_terminate_backend($1)", attempts[0])
                    await conn.execute("SELECT 1")

        stats = RetryStats()
        await retrying(unit_of_work, RetryPolicy(max_attempts=3), stats)
    finally:
        await pool.close()
    assert stats.retries == 1
    assert attempts[0] != attempts[1]
    assert await owner_pool.fetchval("SELECT count(*) FROM failover_probe") == 1


async def test_a_session_on_a_read_only_node_is_retryable_and_dropped(
    settings: Settings, owner_pool: asyncpg.Pool, database_name: str
) -> None:
    await owner_pool.execute("CREATE TABLE failover_probe (n int PRIMARY KEY)")
    await owner_pool.execute("GRANT SELECT, INSERT ON failover_probe TO PUBLIC")
    admin = await asyncpg.connect(_url("postgres"))
    await admin.execute(f'ALTER DATABASE "{database_name}" SET default_transaction_read_only = on')
    pool = await create_pool(settings.database, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            before = await conn.fetchval("SELECT pg_backend_pid()")
            caught: BaseException | None = None
            try:
                async with transaction(conn, settings.database):
                    await conn.execute("INSERT INTO failover_probe VALUES (1)")
            except asyncpg.PostgresError as exc:
                caught = exc
            assert caught is not None and is_wrong_node(caught)
            assert isinstance(classify(caught), RetryableError)
        await admin.execute(
            f'ALTER DATABASE "{database_name}" SET default_transaction_read_only = off'
        )
        async with pool.acquire() as conn, transaction(conn, settings.database):
            # dropped: the pool's one slot holds a new session, which takes the write
            assert await conn.fetchval("SELECT pg_backend_pid()") != before
            await conn.execute("INSERT INTO failover_probe VALUES (1)")
    finally:
        await pool.close()
        await admin.close()
    assert await owner_pool.fetchval("SELECT count(*) FROM failover_probe") == 1
