"""Least privilege: the database defends the ledger against the service's own role.

`pool` logs in as this run's app role (what DATABASE_URL is in production) and
`owner_pool` as the migration login; every statement below that the app role must not
run is refused by PostgreSQL's privilege checks, not by payflow code.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from decimal import Decimal
from pathlib import Path

import asyncpg
import pytest

from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.db import migrate
from payflow.ledger.posting import post_event, posting_key
from payflow.ledger.records import EventType, Outcome
from payflow.ledger.retention import cleanup_processed_events
from payflow.webhooks.attempts.retention import cleanup_webhook_attempt_log
from tests.conftest import APP_ROLE, OWNER_ROLE, RUN_ID, SERVER_URL, _url
from tests.integration.ledger.helpers import balance, new_account, new_event
from tests.processes import run_payflow

ROOT = Path(__file__).resolve().parents[3]


async def _all_tables(pool: asyncpg.Pool) -> list[str]:
    rows = await pool.fetch(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
    )
    return [row["tablename"] for row in rows]


async def _posted_deposit(pool: asyncpg.Pool, settings: Settings) -> None:
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, "dep-roles", "5", EventType.DEPOSIT)
    await post_event(pool, settings, "dep-roles")


async def test_pool_is_the_app_role_with_no_special_attributes(pool: asyncpg.Pool) -> None:
    row = await pool.fetchrow(
        "SELECT current_user AS who, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls"
        " FROM pg_roles r WHERE r.rolname = current_user"
    )
    assert row is not None
    assert row["who"] == APP_ROLE
    assert not (row["rolsuper"] or row["rolcreaterole"] or row["rolcreatedb"])
    assert not row["rolbypassrls"]
    owned = await pool.fetchval(
        "SELECT count(*) FROM pg_class WHERE relowner = current_user::regrole"
        " AND relnamespace = 'public'::regnamespace"
    )
    assert owned == 0
    assert not await pool.fetchval("SELECT pg_has_role(current_user, $1, 'MEMBER')", OWNER_ROLE)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE balance_events SET amount = 100",
        "DELETE FROM balance_events",
        "TRUNCATE balance_events",
        "TRUNCATE balance_events CASCADE",
        "DELETE FROM processed_events",
        "UPDATE processed_events SET idempotency_key = 'x'",
        "UPDATE processed_events SET event_id = 'x'",
        "INSERT INTO assets (code, scale) VALUES ('FAKE', 2)",
        "UPDATE assets SET scale = 0",
        # Raising balance and opening balance together would hide from reconciliation.
        "UPDATE accounts SET initial_balance = initial_balance + 1",
        "UPDATE accounts SET asset = 'USD'",
        "DELETE FROM accounts",
        "DELETE FROM alembic_version",
        "SELECT version_num FROM alembic_version",
        # What an event or a payment moves is written once.
        "UPDATE payment_events SET amount = amount * 1000",
        "UPDATE payment_events SET account_id = account_id",
        "UPDATE payment_events SET event_type = 'deposit'",
        "UPDATE payments SET amount = 1",
        "UPDATE payments SET merchant_id = merchant_id",
        "UPDATE payments SET webhook_url = 'http://example.com/'",
        "INSERT INTO chain_tokens (chain, contract, asset, decimals)"
        " VALUES ('ETH_MAINNET', '0x' || repeat('ab', 20), 'USDC', 6)",
        "DELETE FROM alerts",
    ],
)
async def test_app_role_cannot_rewrite_the_ledger_or_its_claims(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings, statement: str
) -> None:
    await _posted_deposit(pool, settings)
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
        await pool.execute(statement)
    # Nothing changed: the ledger row and its claim are still there, as recorded.
    assert await owner_pool.fetchval("SELECT amount FROM balance_events") == Decimal("5")
    assert await owner_pool.fetchval(
        "SELECT outcome FROM processed_events WHERE idempotency_key = $1", posting_key("dep-roles")
    ) == str(Outcome.SUCCESS)


async def test_app_role_cannot_bypass_the_append_only_triggers(pool: asyncpg.Pool) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="must be owner"):
        await pool.execute("ALTER TABLE balance_events DISABLE TRIGGER ALL")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="must be owner"):
        await pool.execute("ALTER TABLE balance_events DISABLE TRIGGER balance_events_no_truncate")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="session_replication_role"):
        await pool.execute("SET session_replication_role = replica")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="session_replication_role"):
        await pool.execute("SET LOCAL session_replication_role = replica")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
        await pool.execute(f'SET ROLE "{OWNER_ROLE}"')
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="must be owner"):
        await pool.execute("DROP TRIGGER balance_events_no_update_delete ON balance_events")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for schema"):
        await pool.execute(
            "CREATE OR REPLACE FUNCTION balance_events_append_only() RETURNS trigger"
            " LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$"
        )


async def test_app_role_cannot_alter_truncate_or_drop_any_table(pool: asyncpg.Pool) -> None:
    tables = await _all_tables(pool)
    assert {"balance_events", "processed_events", "accounts", "outbox"} <= set(tables)
    for table in tables:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="must be owner"):
            await pool.execute(f'ALTER TABLE "{table}" ADD COLUMN sneaky integer')
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="must be owner"):
            await pool.execute(f'ALTER TABLE "{table}" DISABLE TRIGGER ALL')
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
            await pool.execute(f'TRUNCATE "{table}"')
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="must be owner"):
            await pool.execute(f'DROP TABLE "{table}"')


async def test_app_role_cannot_create_objects_in_the_schema(pool: asyncpg.Pool) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for schema"):
        await pool.execute("CREATE TABLE shadow_ledger (id integer)")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for schema"):
        await pool.execute("CREATE TABLE public.shadow_ledger (id integer)")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for schema"):
        await pool.execute(
            "CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql AS 'SELECT NULL'"
        )


async def test_app_role_still_posts_credits_and_debits(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings, opening="0")
    await new_event(pool, settings, account, "dep-a", "10", EventType.DEPOSIT)
    await new_event(pool, settings, account, "wd-a", "4", EventType.WITHDRAWAL)
    await new_event(pool, settings, account, "wd-b", "7", EventType.WITHDRAWAL)
    assert (await post_event(pool, settings, "dep-a")).outcome == Outcome.SUCCESS
    assert (await post_event(pool, settings, "wd-a")).outcome == Outcome.SUCCESS
    assert (await post_event(pool, settings, "wd-b")).outcome == Outcome.INSUFFICIENT_FUNDS
    replay = await post_event(pool, settings, "dep-a")
    assert (replay.outcome, replay.replayed) == (Outcome.SUCCESS, True)
    assert await balance(pool, account) == Decimal("6")
    ledger = await owner_pool.fetch(
        "SELECT source_event_id, amount FROM balance_events ORDER BY id"
    )
    assert [(r["source_event_id"], r["amount"]) for r in ledger] == [
        ("dep-a", Decimal("10")),
        ("wd-a", Decimal("-4")),
    ]
    outcomes = await owner_pool.fetch("SELECT event_id, outcome FROM processed_events")
    assert {r["event_id"]: r["outcome"] for r in outcomes} == {
        "dep-a": "success",
        "wd-a": "success",
        "wd-b": "insufficient_funds",
    }


async def _seed_claim(
    owner_pool: asyncpg.Pool, event_id: str, outcome: str, age_days: float, status: str
) -> None:
    account = await owner_pool.fetchval("INSERT INTO accounts (asset) VALUES ('ETH') RETURNING id")
    await owner_pool.execute(
        "INSERT INTO payment_events (event_id, account_id, amount, event_type, status)"
        " VALUES ($1, $2, 1, 'deposit', $3)",
        event_id,
        account,
        status,
    )
    await owner_pool.execute(
        "INSERT INTO processed_events (idempotency_key, event_id, outcome, created_at)"
        " VALUES ($1, $2, $3, now() - make_interval(secs => $4))",
        posting_key(event_id),
        event_id,
        outcome,
        age_days * 86400,
    )


async def test_cleanup_function_deletes_only_old_terminal_claims(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool
) -> None:
    await _seed_claim(owner_pool, "old-success", "success", 30, "confirmed")
    await _seed_claim(owner_pool, "old-refused", "insufficient_funds", 20, "failed")
    await _seed_claim(owner_pool, "old-frozen", "account_frozen", 15, "failed")
    await _seed_claim(owner_pool, "old-pending", "pending", 400, "processing")
    await _seed_claim(owner_pool, "old-pending-confirmed", "pending", 400, "confirmed")
    await _seed_claim(owner_pool, "old-but-event-open", "success", 400, "enqueued")
    await _seed_claim(owner_pool, "young-success", "success", 13, "confirmed")
    await _seed_claim(owner_pool, "fresh-success", "success", 0, "confirmed")

    # An argument below the minimum age is clamped up to 14 days; batches are bounded.
    assert await pool.fetchval("SELECT cleanup_processed_events(0, 1)") == 1
    assert await pool.fetchval("SELECT cleanup_processed_events(-5, 1000000)") == 2
    assert await pool.fetchval("SELECT cleanup_processed_events(NULL, NULL)") == 0
    left = {r["event_id"] for r in await owner_pool.fetch("SELECT event_id FROM processed_events")}
    assert left == {
        "old-pending",
        "old-pending-confirmed",
        "old-but-event-open",
        "young-success",
        "fresh-success",
    }
    # A larger age than the minimum is honoured as given.
    await _seed_claim(owner_pool, "month-old", "success", 31, "confirmed")
    assert await pool.fetchval("SELECT cleanup_processed_events(60, 100)") == 0
    assert await pool.fetchval("SELECT cleanup_processed_events(30, 100)") == 1


async def test_cleanup_function_is_pinned_and_owner_defined(owner_pool: asyncpg.Pool) -> None:
    row = await owner_pool.fetchrow(
        "SELECT proowner::regrole::text AS owner, prosecdef, proconfig,"
        " has_function_privilege('public', oid, 'EXECUTE') AS public_exec,"
        " has_function_privilege($1, oid, 'EXECUTE') AS app_exec"
        " FROM pg_proc WHERE proname = 'cleanup_processed_events'",
        APP_ROLE,
    )
    assert row is not None
    assert row["owner"] == OWNER_ROLE
    assert row["prosecdef"] is True
    assert row["proconfig"] == ["search_path=pg_catalog, pg_temp"]
    assert (row["public_exec"], row["app_exec"]) == (False, True)


async def _seed_attempts(owner_pool: asyncpg.Pool, ages_hours: list[float]) -> None:
    """One payment with one webhook attempt row per age (hours before now)."""
    async with owner_pool.acquire() as conn:
        merchant, _api_key, _secret = await create_merchant(conn, "attempts", admin=False)
    payment = await owner_pool.fetchval(
        "INSERT INTO payments (merchant_id, amount, currency, idempotency_key, status,"
        " processed_at, webhook_url) VALUES ($1, 1.00, 'USD', md5(random()::text),"
        " 'succeeded', now(), 'https://hooks.example.com/x') RETURNING id",
        merchant,
    )
    await owner_pool.executemany(
        "INSERT INTO webhook_attempt_log (payment_id, attempt, http_status, attempted_at)"
        " VALUES ($1, $2, 500, now() - make_interval(secs => $3))",
        [(payment, n, hours * 3600) for n, hours in enumerate(ages_hours, start=1)],
    )


async def _attempt_ages(owner_pool: asyncpg.Pool) -> list[int]:
    """Ages of the attempt rows left, in whole hours, youngest first."""
    rows = await owner_pool.fetch(
        "SELECT round(extract(epoch FROM now() - attempted_at) / 3600)::int AS h"
        " FROM webhook_attempt_log ORDER BY attempted_at DESC"
    )
    return [r["h"] for r in rows]


async def test_attempt_log_cleanup_deletes_old_rows_in_batches_and_never_recent_ones(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool
) -> None:
    await _seed_attempts(owner_pool, [0, 1, 23, 25, 48, 24 * 10, 24 * 40, 24 * 400])
    # The service role still cannot delete or rewrite evidence directly.
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await pool.execute("DELETE FROM webhook_attempt_log")
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await pool.execute("UPDATE webhook_attempt_log SET http_status = 200")
    # Older than 30 days, oldest first, at most one batch per call.
    assert await pool.fetchval("SELECT cleanup_webhook_attempt_log(30, 1)") == 1
    assert await _attempt_ages(owner_pool) == [0, 1, 23, 25, 48, 240, 960]
    assert await pool.fetchval("SELECT cleanup_webhook_attempt_log(30, 100)") == 1
    assert await pool.fetchval("SELECT cleanup_webhook_attempt_log(30, 100)") == 0
    # A larger age is honoured as given.
    assert await pool.fetchval("SELECT cleanup_webhook_attempt_log(11, 100)") == 0
    assert await pool.fetchval("SELECT cleanup_webhook_attempt_log(9, 100)") == 1
    # Below the floor (0, negative, NULL) is clamped up to 1 day: the last day stays.
    assert await pool.fetchval("SELECT cleanup_webhook_attempt_log(0, 1)") == 1
    assert await pool.fetchval("SELECT cleanup_webhook_attempt_log(-5, 1000000)") == 1
    assert await pool.fetchval("SELECT cleanup_webhook_attempt_log(NULL, NULL)") == 0
    assert await _attempt_ages(owner_pool) == [0, 1, 23]


async def test_attempt_log_cleanup_function_is_pinned_and_owner_defined(
    owner_pool: asyncpg.Pool,
) -> None:
    row = await owner_pool.fetchrow(
        "SELECT proowner::regrole::text AS owner, prosecdef, proconfig,"
        " has_function_privilege('public', oid, 'EXECUTE') AS public_exec,"
        " has_function_privilege($1, oid, 'EXECUTE') AS app_exec,"
        " has_table_privilege($1, 'webhook_attempt_log', 'DELETE') AS app_delete,"
        " has_table_privilege($1, 'webhook_attempt_log', 'UPDATE') AS app_update"
        " FROM pg_proc WHERE proname = 'cleanup_webhook_attempt_log'",
        APP_ROLE,
    )
    assert row is not None
    assert row["owner"] == OWNER_ROLE
    assert row["prosecdef"] is True
    assert row["proconfig"] == ["search_path=pg_catalog, pg_temp"]
    assert (row["public_exec"], row["app_exec"]) == (False, True)
    assert (row["app_delete"], row["app_update"]) == (False, False)


async def test_attempt_log_retention_runs_as_the_app_role(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    await _seed_attempts(owner_pool, [2, 24 * 29, 24 * 31, 24 * 60])
    assert (
        await cleanup_webhook_attempt_log(pool, settings, database=settings) == 2
    )  # default: 30 days
    keep_all = settings.model_copy(update={"webhook_attempt_log_retention_days": 0})
    assert await cleanup_webhook_attempt_log(pool, keep_all, database=keep_all) == 0
    assert await _attempt_ages(owner_pool) == [2, 24 * 29]


async def test_app_role_cannot_regrant_itself(pool: asyncpg.Pool) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
        await pool.execute("SELECT payflow_grant_service(current_user)")
    # Without grant option PostgreSQL only warns "no privileges were granted".
    await pool.execute(f'GRANT DELETE ON processed_events TO "{APP_ROLE}"')
    assert not await pool.fetchval(
        "SELECT has_table_privilege(current_user, 'processed_events', 'DELETE')"
    )


# ---- `payflow migrate`: roles, database, ownership, grants


async def _drop(database: str | None, *roles: str) -> None:
    conn = await asyncpg.connect(_url("postgres"))
    try:
        if database:
            await conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        for role in roles:
            await conn.execute(f'DROP ROLE IF EXISTS "{role}"')
    finally:
        await conn.close()


async def test_concurrent_role_creation_is_race_safe() -> None:
    suffix = f"{RUN_ID}_{uuid.uuid4().hex[:6]}"
    owner, app = f"payflow_owner_race_{suffix}", f"payflow_app_race_{suffix}"
    conns = [await asyncpg.connect(_url("postgres")) for _ in range(4)]
    try:
        created = await asyncio.gather(
            *(migrate.ensure_roles(conn, owner=owner, app=app) for conn in conns)
        )
        assert sorted(name for names in created for name in names) == sorted([owner, app])
        rows = await conns[0].fetch(
            "SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname = ANY($1::text[])",
            [owner, app],
        )
        assert {r["rolname"]: r["rolcanlogin"] for r in rows} == {owner: False, app: True}
    finally:
        for conn in conns:
            await conn.close()
        await _drop(None, app, owner)


async def test_roles_that_cannot_give_least_privilege_are_refused() -> None:
    conn = await asyncpg.connect(_url("postgres"))
    try:
        superuser = await conn.fetchval("SELECT current_user")
        with pytest.raises(migrate.RoleSetupError, match="superuser"):
            await migrate.ensure_roles(conn, owner=OWNER_ROLE, app=superuser)
        with pytest.raises(migrate.RoleSetupError, match="both"):
            await migrate.ensure_roles(conn, owner=OWNER_ROLE, app=OWNER_ROLE)
    finally:
        await conn.close()


def _run_migrate_cli(database: str, owner: str, app: str) -> subprocess.CompletedProcess[str]:
    server = SERVER_URL.split("://", 1)[1].rsplit("@", 1)[-1]
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://{app}:pw-{RUN_ID}@{server}/{database}",
        "MIGRATION_DATABASE_URL": _url(database),
        "DB_OWNER_ROLE": owner,
    }
    return run_payflow(["migrate"], env, timeout=180, cwd=ROOT)


@pytest.mark.slow
async def test_migrate_cli_creates_roles_database_and_adopts_a_legacy_schema() -> None:
    """A legacy database (everything owned by the superuser, no owner or app role) is
    handed to the owner by `payflow migrate`, which also creates both roles and grants
    the app."""
    suffix = f"{RUN_ID}_{uuid.uuid4().hex[:6]}"
    database = f"payflow_test_{suffix}_legacy"
    owner, app = f"payflow_owner_cli_{suffix}", f"payflow_app_cli_{suffix}"
    try:
        assert await migrate.ensure_database(_url(database)) is True
        await asyncio.to_thread(migrate.upgrade, _url(database), "0004_pipeline")
        done = await asyncio.to_thread(_run_migrate_cli, database, owner, app)
        assert done.returncode == 0, done.stderr
        again = await asyncio.to_thread(_run_migrate_cli, database, owner, app)
        assert again.returncode == 0, again.stderr

        admin = await asyncpg.connect(_url(database))
        try:
            foreign = await admin.fetch(
                "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace"
                " AND relkind IN ('r', 'S', 'v') AND relowner <> $1::text::regrole"
                " UNION ALL SELECT proname FROM pg_proc"
                " WHERE pronamespace = 'public'::regnamespace AND proowner <> $1::text::regrole",
                owner,
            )
            assert foreign == []
            head = migrate.script_directory().get_current_head()
            assert await admin.fetchval("SELECT version_num FROM alembic_version") == head
            # The new app role got DATABASE_URL's password (trust auth does not check it).
            assert await admin.fetchval(
                "SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = $1", app
            )
            # A legacy database keeps its owner; its objects moved to the owner role.
            assert await admin.fetchval(
                "SELECT pg_get_userbyid(datdba) = current_user FROM pg_database WHERE datname = $1",
                database,
            )
        finally:
            await admin.close()
        server = SERVER_URL.split("://", 1)[1].rsplit("@", 1)[-1]
        service = await asyncpg.connect(f"postgresql://{app}@{server}/{database}")
        try:
            account = await service.fetchval(
                "INSERT INTO accounts (asset) VALUES ('USD') RETURNING id"
            )
            assert account is not None
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await service.execute("DELETE FROM processed_events")
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await service.execute("CREATE TABLE t (id integer)")
        finally:
            await service.close()
    finally:
        await _drop(database, app, owner)


async def test_claim_retention_job_runs_as_the_app_role(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    await _seed_claim(owner_pool, "job-old", "success", 100, "confirmed")
    await _seed_claim(owner_pool, "job-recent", "success", 20, "confirmed")
    await _seed_claim(owner_pool, "job-pending", "pending", 100, "enqueued")
    assert (
        await cleanup_processed_events(pool, settings, database=settings) == 1
    )  # default: 90 days
    keep_all = settings.model_copy(update={"processed_events_retention_days": 0})
    assert await cleanup_processed_events(pool, keep_all, database=keep_all) == 0
    left = {r["event_id"] for r in await owner_pool.fetch("SELECT event_id FROM processed_events")}
    assert left == {"job-recent", "job-pending"}


async def test_an_app_role_that_owns_the_database_is_refused() -> None:
    """Owning the database makes a role owner of schema public (PostgreSQL 15+), so it
    could create objects; `payflow migrate` refuses to call that least privilege."""
    suffix = f"{RUN_ID}_{uuid.uuid4().hex[:6]}"
    database = f"payflow_test_{suffix}_appowned"
    owner, app = f"payflow_owner_own_{suffix}", f"payflow_app_own_{suffix}"
    conn = await asyncpg.connect(_url("postgres"))
    try:
        await migrate.ensure_roles(conn, owner=owner, app=app)
        await conn.execute(f'CREATE DATABASE "{database}" OWNER "{app}"')
    finally:
        await conn.close()
    try:
        with pytest.raises(migrate.RoleSetupError, match="may create objects"):
            await asyncio.to_thread(migrate.migrate_database, _url(database), owner=owner, app=app)
    finally:
        await _drop(database, app, owner)


async def test_one_statement_posting_runs_as_the_owner_with_a_pinned_path(
    owner_pool: asyncpg.Pool,
) -> None:
    row = await owner_pool.fetchrow(
        "SELECT proowner::regrole::text AS owner, prosecdef, proconfig,"
        " has_function_privilege('public', oid, 'EXECUTE') AS public_exec,"
        " has_function_privilege($1, oid, 'EXECUTE') AS app_exec"
        " FROM pg_proc WHERE proname = 'ledger_post_success'",
        APP_ROLE,
    )
    assert row is not None
    assert row["owner"] == OWNER_ROLE
    # SECURITY DEFINER (migration 0032): the service role cannot write the journal itself.
    assert row["prosecdef"] is True
    assert row["proconfig"] == ["search_path=public, pg_catalog, pg_temp"]
    assert (row["public_exec"], row["app_exec"]) == (False, True)
