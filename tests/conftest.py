"""Test infrastructure on the real services.

Every run makes its OWN database roles, because roles are cluster-wide and concurrent
runs must not collide: `payflow_owner_<RUN_ID>` owns the schema and
`payflow_app_<RUN_ID>` is the service's login, with only the privileges `payflow
migrate` grants. A template database is built by the real migration path once per run;
every test that needs PostgreSQL gets its own `CREATE DATABASE ... TEMPLATE` copy with
a unique name, dropped afterwards. The `pool` fixture and every service subprocess log
in as the app role, so the whole suite shows the service works with least privilege;
`owner_pool` logs in as the migration login (a superuser) for set-up the service may
not do.
"""

from __future__ import annotations

import os
import secrets
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import asyncpg
import pytest
import structlog

from payflow.config import Settings, load_settings
from payflow.db import migrate
from payflow.db.pool import create_pool

# The migration login: a superuser (or a role with CREATEROLE and CREATEDB).
# Loggers re-read the structlog configuration on every call in tests, and every test
# starts from structlog's defaults (see `_fresh_logging`): an app or role configured by one
# test (level WARNING, JSON) must not decide what a later test's capture_logs sees.
os.environ.setdefault("LOG_CACHE_LOGGERS", "false")

SERVER_URL = os.environ.get("PAYFLOW_TEST_PG", "postgresql://postgres@127.0.0.1:5432")
RUN_ID = uuid.uuid4().hex[:10]
APP_ROLE = f"payflow_app_{RUN_ID}"
OWNER_ROLE = f"payflow_owner_{RUN_ID}"
# Trust auth needs none, but a server that asks for passwords gets this one.
APP_PASSWORD = secrets.token_hex(16)
# Every Redis key this run writes lives under this prefix (the gateway emulator remembers
# a charge for 30 days), and the session deletes them all when it ends.
REDIS_PREFIX = f"payflow-test-{RUN_ID}"
# tests/unit needs no PostgreSQL, RabbitMQ, Redis, anvil or browser (`make test-unit`).
UNIT_TESTS = Path(__file__).resolve().parent / "unit"


def redis_prefix(label: str) -> str:
    """A Redis key prefix of its own under this run's (`REDIS_PREFIX`)."""
    return f"{REDIS_PREFIX}-{label}-{uuid.uuid4().hex[:8]}:"


@pytest.fixture(scope="session", autouse=True)
def _redis_keys_removed(request: pytest.FixtureRequest) -> Iterator[None]:
    """At the end of the session, delete every key under this run's `REDIS_PREFIX`,
    including those written by service processes the tests started. A session of
    tests/unit alone writes none and may run with no Redis at all (`make test-unit`)."""
    yield
    if all(UNIT_TESTS in item.path.parents for item in request.session.items):
        return
    from redis import Redis

    client = Redis.from_url(load_settings().redis_url)
    try:
        batch: list[bytes] = []
        for key in client.scan_iter(match=f"{REDIS_PREFIX}*", count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                client.delete(*batch)
                batch.clear()
        if batch:
            client.delete(*batch)
    finally:
        client.close()


def _url(name: str) -> str:
    """Database `name` as the migration login (superuser)."""
    return f"{SERVER_URL}/{name}"


def app_url(name: str) -> str:
    """Database `name` as this run's app role: the service's view."""
    parts = urlsplit(SERVER_URL)
    server = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{APP_ROLE}:{quote(APP_PASSWORD)}@{server}/{name}"


async def _admin_execute(sql: str) -> None:
    conn = await asyncpg.connect(_url("postgres"))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _create_roles() -> None:
    conn = await asyncpg.connect(_url("postgres"))
    try:
        await migrate.ensure_roles(conn, owner=OWNER_ROLE, app=APP_ROLE)
        await conn.execute(f"ALTER ROLE \"{APP_ROLE}\" PASSWORD '{APP_PASSWORD}'")
    finally:
        await conn.close()


async def _drop_roles() -> None:
    """Drop this run's leftover databases, then its roles (best effort: a failure to
    clean up is reported, not turned into a test failure)."""
    conn = await asyncpg.connect(_url("postgres"))
    try:
        leftovers = await conn.fetch(
            "SELECT datname FROM pg_database WHERE datname LIKE $1", f"%{RUN_ID}%"
        )
        for row in leftovers:
            await conn.execute(f'DROP DATABASE IF EXISTS "{row["datname"]}" WITH (FORCE)')
        for role in (APP_ROLE, OWNER_ROLE):
            try:
                await conn.execute(f'DROP ROLE IF EXISTS "{role}"')
            except asyncpg.PostgresError as error:
                print(f"tests: could not drop role {role}: {error}", file=sys.stderr)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def db_roles() -> Iterator[tuple[str, str]]:
    """(owner, app) roles of this run, dropped at the end of the session."""
    import asyncio

    asyncio.run(_create_roles())
    yield OWNER_ROLE, APP_ROLE
    asyncio.run(_drop_roles())


@pytest.fixture(scope="session")
def template_database(db_roles: tuple[str, str]) -> Iterator[str]:
    """A database migrated by `payflow migrate`'s own path (owned by this run's owner
    role, the app role granted) that per-test databases are cloned from."""
    import asyncio

    name = f"payflow_test_{RUN_ID}_tpl"
    migrate.migrate_database(_url(name), owner=OWNER_ROLE, app=APP_ROLE)
    yield name
    asyncio.run(_admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def clone_database(template: str, name: str) -> None:
    """`name` as a copy of `template` (tables, grants and owner included)."""
    await _admin_execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" OWNER "{OWNER_ROLE}"')


@pytest.fixture
async def database_name(template_database: str) -> AsyncIterator[str]:
    """A fresh, migrated database for one test, dropped afterwards."""
    name = f"payflow_test_{RUN_ID}_{uuid.uuid4().hex[:8]}"
    await clone_database(template_database, name)
    yield name
    await _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_url(database_name: str) -> str:
    """The test's database as the app role (what DATABASE_URL is in production)."""
    return app_url(database_name)


@pytest.fixture
def migration_url(database_name: str) -> str:
    """The test's database as the migration login (MIGRATION_DATABASE_URL)."""
    return _url(database_name)


@pytest.fixture
def settings(database_url: str, migration_url: str) -> Settings:
    return load_settings(
        database_url=database_url,
        migration_database_url=migration_url,
        db_owner_role=OWNER_ROLE,
        lock_timeout_ms=2000,
        redis_key_prefix=f"payflow-test-{RUN_ID}:",  # never a real deployment's keys
    )


@pytest.fixture
async def pool(settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(settings, min_size=1, max_size=10)
    yield pool
    await pool.close()


@pytest.fixture
async def owner_pool(settings: Settings, migration_url: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool of the migration login (a superuser here), for test set-up the service may
    not do (backdating timestamps, deleting rows, seeding reference data). The `pool`
    fixture is the service's view: the app role."""
    pool = await create_pool(settings, dsn=migration_url, min_size=1, max_size=2)
    yield pool
    await pool.close()


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """Each test starts with structlog's default configuration."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


# Tests `make test-fast` leaves out (they still run in `make test` and CI): a module path,
# or a test's node id without its parameters, each with why it is slow. Measured with
# `pytest -n 2 --dist loadfile --durations=60` (docs/testing.md); files may also carry
# @pytest.mark.slow themselves.
SLOW_TESTS: dict[str, str] = {
    # whole systems as processes
    "tests/integration/lab/chaos/test_interrupt.py": "a chaos run, stopped by SIGTERM",
    "tests/e2e/test_http_flow.py": "every role as a process, payments and deposits through HTTP",
    "tests/e2e/test_trace.py": "every role as a process, one trace id followed through all",
    "tests/e2e/test_console.py": "every role as a process and Chromium driving the console",
    "tests/e2e/test_console_books.py": "every role as a process and Chromium on the books page",
    # several processes racing, or killed mid-flight
    "tests/integration/roles/test_processes.py": "workers killed -9 and stopped by SIGTERM",
    "tests/integration/roles/test_start_during_outage.py": "a private PostgreSQL down, then up",
    "tests/integration/payouts/test_crashes_and_chain.py": "payout processes killed at each step",
    "tests/integration/payments/test_finalize_posts_credit.py::"
    "test_processes_finalizing_one_merchants_payments_at_once_credit_each_once": (
        "processes finalizing one merchant's payments at once"
    ),
    "tests/integration/payments/charges/test_claims.py::"
    "test_concurrent_deliveries_in_separate_processes_charge_once": (
        "deliveries racing in separate processes"
    ),
    "tests/integration/payments/charges/test_claims.py::"
    "test_worker_killed_after_the_gateway_charged_ends_succeeded_with_one_charge": (
        "a worker killed -9 after the gateway charged"
    ),
    "tests/integration/webhooks/test_webhook_chains.py::"
    "test_sender_killed_mid_post_is_redelivered_by_the_sweep_after_its_lease": (
        "a sender killed mid-POST, then waiting out its lease"
    ),
    "tests/integration/metrics/test_metrics_endpoints.py": (
        "worker and scheduler processes with metrics"
    ),
    # the schema walked down and up, the CLI as many subprocesses
    "tests/integration/db/test_migrations.py": "the migration history walked down and up over data",
    "tests/integration/api/test_api_cli_and_migration.py": "the API and CLI started as processes",
    "tests/integration/ops/test_status.py": "`payflow status` and `jobs` as subprocesses",
    "tests/integration/alerts/test_alerts_table.py::test_alerts_list_and_ack_commands": (
        "`payflow alerts` as a dozen subprocesses"
    ),
    "tests/integration/ingress/test_token_registry.py::"
    "test_tokens_cli_adds_lists_and_refuses_clearly": "`payflow tokens` as a dozen subprocesses",
    "tests/integration/api/test_limits.py::test_assets_cli_lists_and_sets_limits": (
        "`payflow assets` as a dozen subprocesses"
    ),
    "tests/integration/payments/charges/test_dead.py::test_payments_review_and_resolve_commands": (
        "`payflow payments` as subprocesses"
    ),
    "tests/integration/api/test_body_caps_metadata_and_replay.py::"
    "test_a_kept_deposit_is_credited_by_replaying_its_delivery": (
        "`payflow unmatched replay` and the pipeline as processes"
    ),
    # the heaviest files of the fast loop (tens of seconds each on two cores): `make test`
    # runs them, `make test-fast` leaves them out
    "tests/integration/config/test_settings.py": "`payflow` started once per setting checked",
    "tests/integration/lab/test_lab_boundary.py": "a wheel built and a production install made",
    "tests/integration/commands/test_cli_bad_arguments.py": "`payflow` commands as subprocesses",
    "tests/integration/config/test_deposit_xpub.py": "role processes refusing bad keys at start-up",
    "tests/integration/payouts/test_mismatch_settle.py": "token payouts mined and settled on anvil",
    "tests/integration/payouts/test_proof_and_stalls.py": "payouts driven through stalls on anvil",
    "tests/integration/payouts/test_action_races.py": "operator actions racing as processes",
    "tests/integration/payouts/test_proof_members.py": "receipt shapes from a contract on anvil",
    "tests/integration/chain/test_node_misbehaving.py": "anvil behind a rewriting proxy",
    "tests/integration/ledger/test_recovery.py": "recovery waiting out stale-event windows",
    "tests/integration/db/test_roles.py": "databases migrated and re-owned per test",
    "tests/integration/db/test_statement_bounds.py": "statements waiting out their lock bounds",
    "tests/integration/db/test_autocommit_lock_bound.py": "steps waiting out their lock bounds",
    "tests/integration/db/pgbouncer/test_bouncer_pipeline.py": "the pipeline through PgBouncer",
    "tests/integration/webhooks/test_webhook_direct.py": "first sends waiting out leases",
    "tests/integration/webhooks/test_webhook_late_delivery.py": "sends paused past their lease",
    "tests/integration/webhooks/test_webhook_fresh_claim.py": "first claims waiting out leases",
    "tests/integration/api/test_slow_clients.py": "an API process against 1,100 trickling sockets",
    "tests/integration/api/test_slow_readers.py": "an API process against clients that never read",
    "tests/integration/api/test_api_lost_sessions.py": "the API while its sessions are terminated",
    "tests/integration/broker/test_topology.py": "queues declared and dead-lettered on RabbitMQ",
    # generated inputs
    "tests/integration/api/test_openapi_fuzz.py": "schemathesis fuzzing every operation",
}


# The files that take longest, longest first (seconds on a quiet 2-core machine, whole
# suite running). pytest-xdist hands out whole files (`--dist loadfile`) in collection
# order (`--no-loadscope-reorder`, Makefile): started last, the HA file alone was the
# suite's last five minutes. Started first, the others fill the workers around it.
LONGEST_FIRST: tuple[str, ...] = (
    "tests/integration/lab/ha/test_failover.py",  # ~310 s
    "tests/integration/lab/chaos/test_chaos.py",  # ~110 s
    "tests/integration/lab/chaos/test_interrupt.py",  # ~60 s
    "tests/integration/db/test_migrations.py",
    "tests/e2e/test_console.py",
    "tests/integration/api/test_openapi_fuzz.py",
    "tests/integration/payouts/test_concurrent_holds.py",
    "tests/integration/ledger/test_concurrency.py",
    "tests/integration/payouts/test_mismatch_settle.py",
    "tests/integration/api/test_slow_clients.py",
    "tests/integration/ledger/test_adjustments.py",
    "tests/integration/api/test_api_keys_cli.py",
    "tests/integration/ingress/test_token_registry.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `slow` every test SLOW_TESTS names, by module or by test; then move the files
    LONGEST_FIRST names to the front, in its order (the rest keep theirs)."""
    for item in items:
        node = item.nodeid.split("[", 1)[0]
        if node in SLOW_TESTS or node.split("::", 1)[0] in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
