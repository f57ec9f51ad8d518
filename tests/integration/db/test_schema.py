"""The migrations reach exactly the readable schema: payflow/db/schema.sql (generated)
and each function's statement in the functions.sql beside its owning package.

Every test runs on a fresh copy of the session's template database, which `payflow
migrate`'s own path (`migrate.migrate_database`) migrated to head.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator

import asyncpg
import pytest

from payflow.db import functions, schema
from tests.conftest import APP_ROLE, OWNER_ROLE, SERVER_URL

REGENERATE = (
    "run `make schema` (or `uv run python -m payflow.db.schema postgresql://postgres@"
    "127.0.0.1:5432`) and commit payflow/db/schema.sql and the functions.sql files it writes"
)
RUN_ROLES = {OWNER_ROLE: schema.OWNER_PLACEHOLDER, APP_ROLE: schema.APP_PLACEHOLDER}


@pytest.fixture
async def owner_conn(migration_url: str) -> AsyncIterator[asyncpg.Connection]:
    """The test database as the migration login, acting as this run's owner role."""
    conn = await asyncpg.connect(migration_url)
    await conn.execute(f'SET ROLE "{OWNER_ROLE}"')
    yield conn
    await conn.close()


async def _dump(migration_url: str) -> str:
    return await asyncio.to_thread(schema.dump_schema, migration_url, RUN_ROLES)


async def test_the_migrations_reach_schema_sql_exactly(migration_url: str) -> None:
    expected = schema.schema_path().read_text(encoding="utf-8")
    actual = await _dump(migration_url)
    assert actual == expected, (
        "payflow/db/schema.sql is not the schema the migrations reach at head: "
        f"{REGENERATE}\n{schema.schema_diff(expected, actual)}"
    )


async def test_each_function_is_its_functions_sql_statement(
    owner_conn: asyncpg.Connection,
) -> None:
    """pg_get_functiondef of each function at head (normalised) is the statement its
    functions.sql holds, and running every statement changes no function and adds none."""
    head = await schema.function_definitions(owner_conn)
    listed = {
        entry.name: entry
        for path in functions.function_files().values()
        for entry in functions.read_functions(path).entries
    }
    differing = [
        name
        for name, entry in sorted(listed.items())
        if name in head
        and functions.normalise_definition(entry.statement)
        != functions.normalise_definition(head[name])
    ]
    assert differing == [], f"functions.sql statements differ from the database: {REGENERATE}"

    transaction = owner_conn.transaction()
    await transaction.start()
    try:
        for entry in listed.values():
            await owner_conn.execute(entry.statement)
        replayed = await schema.function_definitions(owner_conn)
    finally:
        await transaction.rollback()
    assert replayed == head, (
        f"a functions.sql statement does not recreate its function: {REGENERATE}"
    )
    assert await schema.function_definitions(owner_conn) == head


async def test_every_function_at_head_is_listed_beside_its_owner(migration_url: str) -> None:
    conn = await asyncpg.connect(migration_url)
    try:
        head = set(await schema.function_definitions(conn))
    finally:
        await conn.close()
    owned = functions.owners()
    assert sorted(head - set(owned)) == [], (
        "functions with no functions.sql entry: add '-- name: <function>' to the functions.sql"
        f" of the owning package, then {REGENERATE}"
    )
    assert sorted(set(owned) - head) == [], f"entries of functions gone at head: {REGENERATE}"
    # The known owners, so a function never silently moves to another package.
    assert owned["payment_finalize"] == "payflow.payments"
    assert owned["ledger_post_success"] == "payflow.ledger"
    assert owned["balance_events_append_only"] == "payflow.ledger"
    assert owned["cleanup_processed_events"] == "payflow.ledger"
    assert owned["cleanup_webhook_attempt_log"] == "payflow.webhooks.attempts"
    assert {name for name, package in owned.items() if package == "payflow.db"} == {
        name for name in head if name.startswith("payflow_grant_")
    }


async def test_a_function_body_that_drifted_is_caught_by_both_checks(
    migration_url: str, owner_conn: asyncpg.Connection
) -> None:
    """payment_finalize given back 0022's lookup (the one 0024 replaced): the dump no
    longer equals schema.sql, and the function check names payment_finalize."""
    head = functions.function_definition("payflow.payments", "payment_finalize")
    lookup = "WHERE p.id = $1 AND p.status NOT IN ('succeeded', 'failed')"
    assert head.count(lookup) == 1
    await owner_conn.execute(head.replace(lookup, "WHERE p.id = $1 AND p.status = 'pending'"))

    problems = schema.function_mismatches(await schema.function_definitions(owner_conn))
    assert problems == [
        "payment_finalize: payflow.payments's functions.sql differs from the database"
    ]

    expected = schema.schema_path().read_text(encoding="utf-8")
    actual = await _dump(migration_url)
    assert actual != expected
    diff = schema.schema_diff(expected, actual)
    assert "-            WHERE p.id = $1 AND p.status NOT IN ('succeeded', 'failed')" in diff
    assert "+            WHERE p.id = $1 AND p.status = 'pending'" in diff


async def test_the_generator_reports_nothing_to_change_at_head(migration_url: str) -> None:
    """`update_functions` over the head's definitions leaves every functions.sql as it
    is (the files are the generator's own output) and finds no unowned function."""
    conn = await asyncpg.connect(migration_url)
    try:
        head = await schema.function_definitions(conn)
    finally:
        await conn.close()
    update = schema.update_functions(head)
    assert update.files == {}, f"functions.sql files would change: {REGENERATE}"
    assert update.unowned == []
    assert update.removed == []


async def _leftovers() -> set[str]:
    conn = await asyncpg.connect(f"{SERVER_URL}/postgres")
    try:
        rows = await conn.fetch(
            "SELECT datname AS name FROM pg_database WHERE datname LIKE 'payflow\\_schema\\_%'"
            " UNION ALL SELECT rolname FROM pg_roles WHERE rolname LIKE 'payflow\\_schema\\_%'"
        )
    finally:
        await conn.close()
    return {row["name"] for row in rows}


async def test_the_generator_command_agrees_with_this_test_and_cleans_up() -> None:
    """The lead's one command, `python -m payflow.db.schema SERVER_URL --check`, on its own
    throwaway database and roles, finds nothing to change, and leaves neither behind."""
    before = await _leftovers()
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "payflow.db.schema", SERVER_URL, "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "already match the head" in result.stdout
    assert await _leftovers() == before
