"""A session lost mid-transaction behind PgBouncer: a terminated backend, or PgBouncer
itself restarted. Either reaches the code as a connection-class error: `transaction()`
raises it (never its ROLLBACK's failure), and a consumer retries the message on its tier
instead of dead-lettering it at its first attempt.

Each test runs its own pgbouncer (restarting the run's shared one would break the
other tests), on the same port across the restart."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote

import asyncpg
import pytest
from structlog.testing import capture_logs

from payflow.config import Settings
from payflow.db.pool import create_pool
from payflow.db.tx import transaction
from payflow.errors import RetryableError, classify, is_connection_error
from payflow.ledger.accounts import create_account
from payflow_lab.bench.submit import DirectSubmitter
from tests.conftest import APP_PASSWORD, APP_ROLE
from tests.integration.db.pgbouncer.bouncer import PgBouncer
from tests.integration.db.pgbouncer.conftest import through_bouncer
from tests.integration.support import wait_until

pytestmark = pytest.mark.slow

Lose = Callable[[int], Awaitable[None]]


@pytest.fixture
def private_bouncer(db_roles: tuple[str, str]) -> Iterator[PgBouncer]:
    workdir = Path(tempfile.mkdtemp(prefix="payflow-pgbouncer-loss-"))
    workdir.chmod(0o700)
    running = PgBouncer.start(workdir, {APP_ROLE: APP_PASSWORD})
    try:
        yield running
    finally:
        running.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def loss_settings(
    direct_pipe_settings: Settings, private_bouncer: PgBouncer, database_name: str
) -> Settings:
    """The pipeline behind the private pgbouncer. A lock wait is never what ends the
    test's transaction (long lock timeout), and the tiers outlast a pgbouncer restart."""
    url = private_bouncer.url(APP_ROLE, quote(APP_PASSWORD), database_name)
    return through_bouncer(direct_pipe_settings, url).model_copy(
        update={"lock_timeout_ms": 60_000, "retry_tiers_ms": (500, 1000, 2000, 4000)}
    )


def _loser(how: str, owner_pool: asyncpg.Pool, bouncer: PgBouncer) -> Lose:
    """How the session is lost: its server backend terminated, or pgbouncer restarted."""

    async def terminate(backend: int) -> None:
        assert await owner_pool.fetchval("SELECT pg_terminate_backend($1)", backend)

    async def restart(_backend: int) -> None:
        await asyncio.to_thread(bouncer.restart)

    return terminate if how == "terminate" else restart


@pytest.mark.parametrize("how", ["terminate", "restart"])
async def test_a_transaction_lost_midway_raises_its_connection_error(
    how: str, loss_settings: Settings, owner_pool: asyncpg.Pool, private_bouncer: PgBouncer
) -> None:
    lose = _loser(how, owner_pool, private_bouncer)
    before = await owner_pool.fetchval("SELECT count(*) FROM accounts")
    pool = await create_pool(loss_settings, min_size=1, max_size=2)
    try:
        async with pool.acquire() as conn:
            with pytest.raises(BaseException) as raised:  # any of the class; checked below
                async with transaction(conn, loss_settings):
                    await create_account(conn, "USD", Decimal(0))
                    await lose(await conn.fetchval("SELECT pg_backend_pid()"))
                    await conn.fetchval("SELECT 1")
        error = raised.value
        assert is_connection_error(error), repr(error)
        assert isinstance(classify(error), RetryableError)
        # The pool hands out a working session again.
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT 1") == 1
    finally:
        await pool.close()
    assert await owner_pool.fetchval("SELECT count(*) FROM accounts") == before  # rolled back


async def _blocked_backend(owner_pool: asyncpg.Pool) -> int:
    """The app role's server backend waiting on a lock (the worker's posting)."""
    pid: int = await wait_until(
        lambda: owner_pool.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE usename = $1"
            " AND datname = current_database() AND wait_event_type = 'Lock' LIMIT 1",
            APP_ROLE,
        ),
        what="the worker's posting waiting on the account's lock",
    )
    return pid


@pytest.mark.parametrize("how", ["terminate", "restart"])
async def test_a_posting_lost_mid_transaction_is_retried_not_dead_lettered(
    how: str,
    loss_settings: Settings,
    owner_pool: asyncpg.Pool,
    private_bouncer: PgBouncer,
    start_roles,
) -> None:
    lose = _loser(how, owner_pool, private_bouncer)
    async with owner_pool.acquire() as conn:
        account = (await create_account(conn, "USD", Decimal(0))).id
    submitter = DirectSubmitter(owner_pool, loss_settings)
    with capture_logs() as logs:
        running = await start_roles(("relay", "worker"), settings=loss_settings)
        async with owner_pool.acquire() as holder:
            locked = holder.transaction()
            await locked.start()
            await holder.execute("SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE", account)
            await submitter.submit_deposit("lost-1", account, "3.50")
            backend = await _blocked_backend(owner_pool)
            await lose(backend)  # the posting's session ends in the middle of its statement
            await locked.rollback()
        await wait_until(
            lambda: owner_pool.fetchval(
                "SELECT status IN ('confirmed', 'failed') FROM payment_events"
                " WHERE event_id = 'lost-1'"
            ),
            limit_s=60,
            what="the event final",
        )
        await running.stop()
    status = await owner_pool.fetchval(
        "SELECT status FROM payment_events WHERE event_id = 'lost-1'"
    )
    assert status == "confirmed", [e for e in logs if e["log_level"] in ("warning", "error")]
    assert await owner_pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0
    assert await owner_pool.fetchval(
        "SELECT balance FROM accounts WHERE id = $1", account
    ) == Decimal("3.50")
    # The posting was waiting on the lock when its session ended, and the lock was
    # released only afterwards: the credit above is a retry's (the posting's own bounded
    # retry, or the consumer's next tier), and nothing was dead-lettered on the way.
    assert await owner_pool.fetchval("SELECT count(*) FROM balance_events") == 1
    assert not [e for e in logs if e["event"] == "payflow.consumer.dead_lettered"]


@pytest.mark.parametrize("how", ["terminate", "restart"])
async def test_the_blocks_own_error_survives_a_rollback_that_fails(
    how: str, loss_settings: Settings, owner_pool: asyncpg.Pool, private_bouncer: PgBouncer
) -> None:
    """The block fails for its own reason after its session is gone: the ROLLBACK then
    fails too, and the caller sees the block's error, not the clean-up's."""
    lose = _loser(how, owner_pool, private_bouncer)
    pool = await create_pool(loss_settings, min_size=1, max_size=2)
    try:
        async with pool.acquire() as conn:
            with pytest.raises(LookupError, match="the block's own reason"):
                async with transaction(conn, loss_settings):
                    await lose(await conn.fetchval("SELECT pg_backend_pid()"))
                    raise LookupError("the block's own reason")
    finally:
        await pool.close()
