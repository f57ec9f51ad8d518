"""A commit the synchronous standby never confirmed is not answered as done.

A private PostgreSQL 15 (initdb; the shared server is never reconfigured) names a
synchronous standby that never connects, so every commit waits for it. When that wait is
cancelled (`pg_cancel_backend`, as an operator or a manager does to sessions hanging on a
lost standby; `statement_timeout` never does, PostgreSQL disarms it before the commit),
PostgreSQL answers the COMMIT with success and a warning: the transaction is on this node
only, and a failover loses it. payflow's pooled connection raises the retryable
`CommitUnconfirmed` instead, from `transaction()` and from a statement that is its own
transaction alike, and a retry of idempotent work finds the row once.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.pool import create_pool
from payflow.db.tx import transaction
from payflow.errors import CommitUnconfirmed, RetryableError, classify
from payflow_lab.chaos.cluster import PG_BIN, PrivatePostgres

pytestmark = pytest.mark.skipif(
    not (PG_BIN / "initdb").exists(), reason="needs the PostgreSQL 15 server binaries"
)


def _private_server() -> tuple[Path, PrivatePostgres]:
    root = Path(tempfile.mkdtemp(prefix="payflow-sync-"))
    root.chmod(0o755)  # PostgreSQL's OS user must reach its directory
    server = PrivatePostgres(root)
    server.init()
    return root, server


@pytest.fixture
async def waiting_primary() -> AsyncIterator[str]:
    """A private server whose commits wait for a standby that never comes; its URL."""
    root, server = _private_server()
    url = f"postgresql://{server.superuser}@127.0.0.1:{server.port}/postgres"
    try:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute("CREATE TABLE probe (n int PRIMARY KEY)")
            await conn.execute("ALTER SYSTEM SET synchronous_standby_names = 'ghost'")
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()
        yield url
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _cancel_when_waiting_for_the_standby(url: str, pid: int) -> None:
    """Cancel backend `pid` once it waits for the synchronous standby (wait event SyncRep)."""
    admin = await asyncpg.connect(url)
    try:
        for _ in range(200):
            event = await admin.fetchval(
                "SELECT wait_event FROM pg_stat_activity WHERE pid = $1", pid
            )
            if event == "SyncRep":
                assert await admin.fetchval("SELECT pg_cancel_backend($1)", pid)
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"backend {pid} never waited for the standby")
    finally:
        await admin.close()


async def test_a_commit_the_standby_never_confirmed_raises_and_its_retry_finds_it(
    settings: Settings, waiting_primary: str
) -> None:
    pool = await create_pool(settings.database, dsn=waiting_primary, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            pid = await conn.fetchval("SELECT pg_backend_pid()")
            canceller = asyncio.create_task(
                _cancel_when_waiting_for_the_standby(waiting_primary, pid)
            )
            with pytest.raises(CommitUnconfirmed) as caught:
                async with transaction(conn, settings.database):
                    await conn.execute("INSERT INTO probe VALUES (1) ON CONFLICT DO NOTHING")
            await canceller
            assert isinstance(classify(caught.value), RetryableError)
            # Committed here only, as the warning said: what a failover would lose.
            assert await conn.fetchval("SELECT count(*) FROM probe") == 1
            # The same connection goes on: a read commits nothing and is answered.
            assert await conn.fetchval("SELECT 41 + 1") == 42
            # A statement that is its own transaction is checked the same way.
            canceller = asyncio.create_task(
                _cancel_when_waiting_for_the_standby(waiting_primary, pid)
            )
            with pytest.raises(CommitUnconfirmed):
                await conn.execute("INSERT INTO probe VALUES (2)")
            await canceller
    finally:
        await pool.close()
    check = await asyncpg.connect(waiting_primary)
    try:
        # The idempotent retry (ON CONFLICT) once the standby is no longer awaited: one row.
        await check.execute("ALTER SYSTEM RESET synchronous_standby_names")
        await check.execute("SELECT pg_reload_conf()")
        await check.execute("INSERT INTO probe VALUES (1) ON CONFLICT DO NOTHING")
        assert await check.fetchval("SELECT count(*) FROM probe") == 2
    finally:
        await check.close()
