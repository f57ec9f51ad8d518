"""Migrations: one linear history; up on an empty database, down to nothing, and up
again; walks over a database with data keep it, and steps that would drop it refuse
unless forced; databases stamped with the old two heads upgrade."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import uuid
from collections.abc import Iterator
from importlib import resources

import asyncpg
import pytest

from payflow.db import migrate
from tests.conftest import APP_ROLE, OWNER_ROLE, SERVER_URL
from tests.processes import PAYFLOW_MAIN, run_payflow

CLI = PAYFLOW_MAIN

EXPECTED_TABLES = {
    "accounts",
    "assets",
    "balance_events",
    "dead_letter_queue",
    "payment_events",
    "processed_events",
    "merchants",
    "payments",
    "outbox",
}


async def _tables(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            " AND tablename <> 'alembic_version'"
        )
    finally:
        await conn.close()
    return {r["tablename"] for r in rows}


@pytest.fixture
def empty_database_url() -> Iterator[str]:
    url = f"{SERVER_URL}/payflow_test_migrate_{uuid.uuid4().hex[:8]}"
    assert asyncio.run(migrate.ensure_database(url)) is True
    yield url

    async def drop() -> None:
        conn = await asyncpg.connect(migrate.admin_url(url))
        try:
            await conn.execute(f'DROP DATABASE "{migrate.database_name(url)}" WITH (FORCE)')
        finally:
            await conn.close()

    asyncio.run(drop())


def test_up_down_up(empty_database_url: str) -> None:
    url = empty_database_url
    migrate.upgrade(url)
    migrate.upgrade(url)  # idempotent
    after_up = asyncio.run(_tables(url))
    assert EXPECTED_TABLES <= after_up
    assert asyncio.run(_seeded_assets(url)) == {
        "ETH": 18,
        "USDC": 6,
        "USDT": 6,
        "WBTC": 8,
        "DAI": 18,
        "RUB": 2,
        "USD": 2,
        "EUR": 2,
    }
    migrate.downgrade(url, "base")
    assert asyncio.run(_tables(url)) == set()
    migrate.upgrade(url)
    assert asyncio.run(_tables(url)) == after_up


async def _seeded_assets(url: str) -> dict[str, int]:
    conn = await asyncpg.connect(url)
    try:
        return {r["code"]: r["scale"] for r in await conn.fetch("SELECT code, scale FROM assets")}
    finally:
        await conn.close()


# --- one linear history; downgrades that would drop data refuse unless forced ----------

DATA_WALK_HEAD = "0004_pipeline"  # the newest revision whose contents this test knows


def _fetch(url: str, sql: str, *args: object) -> list[asyncpg.Record]:
    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(url)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    return asyncio.run(run())


def _versions(url: str) -> list[str]:
    return [r["version_num"] for r in _fetch(url, migrate.current_revision_sql())]


def _columns(url: str, table: str) -> list[str]:
    rows = _fetch(
        url,
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position",
        table,
    )
    return [r["column_name"] for r in rows]


# Tables that exist at 0004_pipeline and hold data that must survive a walk above it.
DATA_TABLES = (
    "merchants",
    "accounts",
    "payment_events",
    "balance_events",
    "processed_events",
    "payments",
    "outbox",
    "dead_letter_queue",
    "api_idempotency",
    "deposit_addresses",
    "unmatched_provider_events",
)


# Columns a later revision moved to another table: read from there when the column is gone.
# 0038 moved each merchant's key into api_keys (its `default` write key).
MOVED = {
    ("merchants", "api_key_hash"): "(SELECT k.key_hash FROM api_keys k"
    " WHERE k.merchant_id = merchants.id ORDER BY k.created_at, k.id LIMIT 1)",
}


def _snapshot(url: str, columns: dict[str, list[str]]) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every data table, restricted to `columns[table]`, sorted (a column a
    later revision moved is read where it went, `MOVED`)."""
    snapshot: dict[str, list[tuple[object, ...]]] = {}
    for table, names in columns.items():
        present = set(_columns(url, table))
        listed = ", ".join(
            f'"{name}"' if name in present or (table, name) not in MOVED else MOVED[table, name]
            for name in names
        )
        rows = _fetch(url, f"SELECT {listed} FROM {table}")
        snapshot[table] = sorted((tuple(r.values()) for r in rows), key=repr)
    return snapshot


def _insert_data(url: str) -> None:
    """One of everything 0001-0004 created, as the service writes it."""

    async def run() -> None:
        conn = await asyncpg.connect(url)
        try:
            async with conn.transaction():
                merchant = await conn.fetchval(
                    "INSERT INTO merchants (name, api_key_hash, webhook_secret)"
                    " VALUES ('shop', 'sha256:abc', 'whsec_c2VjcmV0') RETURNING id"
                )
                account = await conn.fetchval(
                    "INSERT INTO accounts (asset, balance, merchant_id, settlement)"
                    " VALUES ('USD', 12.34, $1, true) RETURNING id",
                    merchant,
                )
                payment = await conn.fetchval(
                    "INSERT INTO payments (merchant_id, amount, currency, idempotency_key,"
                    " status, processed_at, webhook_url)"
                    " VALUES ($1, 12.34, 'USD', 'idem-1', 'succeeded', now(),"
                    " 'https://hooks.example.com/x') RETURNING id",
                    merchant,
                )
                event_id = f"payment:{payment}"
                await conn.execute(
                    "INSERT INTO payment_events (event_id, account_id, amount, event_type, status)"
                    " VALUES ($1, $2, 12.34, 'payment_credit', 'confirmed')",
                    event_id,
                    account,
                )
                await conn.execute(
                    "INSERT INTO balance_events (account_id, amount, event_type, source_event_id,"
                    " balance_after) VALUES ($1, 12.34, 'payment_credit', $2, 12.34)",
                    account,
                    event_id,
                )
                await conn.execute(
                    "INSERT INTO processed_events (idempotency_key, event_id, outcome)"
                    " VALUES ($1, $1, 'success')",
                    event_id,
                )
                await conn.execute(
                    "INSERT INTO outbox (topic, payload) VALUES ('webhook.deliver', $1::jsonb)",
                    f'{{"version": 1, "payment_id": "{payment}"}}',
                )
                await conn.execute(
                    "INSERT INTO dead_letter_queue (source, subject_id, error, attempt)"
                    " VALUES ('webhook', $1, 'WebhookHTTPStatus: 500', 4)",
                    str(payment),
                )
                await conn.execute(
                    "INSERT INTO api_idempotency (merchant_id, scope, key, request_hash)"
                    " VALUES ($1, 'payments', 'idem-1', 'h')",
                    merchant,
                )
                await conn.execute(
                    "INSERT INTO deposit_addresses (chain, address, account_id)"
                    " VALUES ('ETH_MAINNET', '0x' || repeat('ab', 20), $1)",
                    account,
                )
                await conn.execute(
                    "INSERT INTO unmatched_provider_events (event_id, reason, chain, payload)"
                    " VALUES ('alchemy:1', 'unknown_address', 'ETH_MAINNET', '{}')"
                )
        finally:
            await conn.close()

    asyncio.run(run())


def test_history_is_one_linear_chain() -> None:
    script = migrate.script_directory()
    assert len(script.get_heads()) == 1
    chain = list(script.walk_revisions())  # head first
    assert chain[-1].revision == "0001_ledger" and chain[-1].down_revision is None
    for newer, older in itertools.pairwise(chain):
        assert newer.down_revision == older.revision, newer.revision
        assert not newer.branch_labels and not newer.dependencies
        assert not older.is_branch_point and not newer.is_merge_point
        assert int(newer.revision[:4]) == int(older.revision[:4]) + 1
    files = list(resources.files("payflow.db.migrations").joinpath("versions").iterdir())
    assert len(chain) == len([f for f in files if f.name[:4].isdigit()])


def test_a_walk_above_0004_keeps_every_row(empty_database_url: str) -> None:
    url = empty_database_url
    migrate.upgrade(url, DATA_WALK_HEAD)
    _insert_data(url)
    columns = {table: _columns(url, table) for table in DATA_TABLES}
    before = _snapshot(url, columns)
    assert all(before[table] for table in DATA_TABLES)
    migrate.upgrade(url)
    assert _snapshot(url, columns) == before
    migrate.downgrade(url, DATA_WALK_HEAD)  # nothing above 0004 holds this data
    assert _versions(url) == [DATA_WALK_HEAD]
    assert _snapshot(url, columns) == before
    migrate.upgrade(url)
    assert _snapshot(url, columns) == before


def test_downgrades_that_drop_data_refuse_unless_forced(empty_database_url: str) -> None:
    url = empty_database_url
    migrate.upgrade(url, DATA_WALK_HEAD)
    _insert_data(url)
    kept = {table: _columns(url, table) for table in ("merchants", "payment_events")}
    before = _snapshot(url, kept)
    # Each step names what it would lose; the refused step rolls back whole.
    steps = [
        ("0003_api", "settlement flag"),
        ("0002_payments_outbox", "Idempotency-Key"),
        ("0001_ledger", "merchants"),
        ("base", "accounts"),
    ]
    for target, lost in steps:
        current = _versions(url)
        with pytest.raises(migrate.DataLossRefused, match=lost):
            migrate.downgrade(url, target)
        with pytest.raises(migrate.DataLossRefused, match=lost):
            migrate.downgrade(url, "base")
        assert _versions(url) == current
        if target == "0003_api":
            assert _fetch(url, "SELECT count(*) AS n FROM accounts WHERE settlement")[0]["n"] == 1
            assert _snapshot(url, kept) == before
        migrate.downgrade(url, target, force=True)
        assert _versions(url) == ([] if target == "base" else [target])
        if target == "0003_api":
            assert "settlement" not in _columns(url, "accounts")
            assert _snapshot(url, kept) == before  # forced past 0004: 0001-0003 data stays
    assert asyncio.run(_tables(url)) == set()
    migrate.upgrade(url)
    assert EXPECTED_TABLES <= asyncio.run(_tables(url))
    assert _fetch(url, "SELECT count(*) AS n FROM accounts")[0]["n"] == 0


def test_cli_downgrade_refuses_in_one_line_and_forces(empty_database_url: str) -> None:
    url = empty_database_url
    # The way `payflow migrate` sets a database up: the run's roles, the owner owns it all.
    asyncio.run(migrate.prepare_database(url, owner=OWNER_ROLE, app=APP_ROLE))
    migrate.upgrade(url, DATA_WALK_HEAD, owner_role=OWNER_ROLE)
    _insert_data(url)
    env = {
        **os.environ,
        "DATABASE_URL": url.replace("://postgres@", f"://{APP_ROLE}@", 1),
        "MIGRATION_DATABASE_URL": url,
        "DB_OWNER_ROLE": OWNER_ROLE,
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_payflow(["migrate", *args], env, timeout=120, command=CLI)

    refused = cli("--downgrade", "0003_api")
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "downgrade refused" in lines[0] and "--force" in lines[0]
    assert _versions(url) == [DATA_WALK_HEAD]
    unknown = cli("--downgrade", "no_such_revision")
    assert unknown.returncode == 1 and len(unknown.stderr.strip().splitlines()) == 1
    # "" and "@" must not end in alembic's traceback, and "head", "heads" and "x@head"
    # must not answer "migrations downgraded" having done nothing: each is refused.
    for name in ("", "@", "head", "heads", "x@head", "+1", "0003_api@head", "0003_api+1"):
        odd = cli("--downgrade", name)
        assert odd.returncode == 1, (name, odd.stdout, odd.stderr)
        lines = odd.stderr.strip().splitlines()
        assert len(lines) == 1 and "is not a revision id" in lines[0], (name, lines)
    assert _versions(url) == [DATA_WALK_HEAD]
    same = cli("--downgrade", DATA_WALK_HEAD)
    assert same.returncode == 0, same.stderr
    assert f"nothing to downgrade: schema already at {DATA_WALK_HEAD}" in same.stderr
    assert cli("--force").returncode == 2
    forced = cli("--downgrade", "0003_api", "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"schema at 0003_api (was {DATA_WALK_HEAD})" in forced.stderr
    assert _versions(url) == ["0003_api"]
    assert cli().returncode == 0
    assert _versions(url) == [migrate.script_directory().get_current_head()]


def test_a_database_with_the_old_two_heads_upgrades_cleanly(empty_database_url: str) -> None:
    """Before 0004 was re-parented onto 0003, both were heads: alembic_version held both."""
    url = empty_database_url
    migrate.upgrade(url, DATA_WALK_HEAD)
    _insert_data(url)
    columns = {table: _columns(url, table) for table in DATA_TABLES}
    before = _snapshot(url, columns)
    _fetch(url, "INSERT INTO alembic_version (version_num) VALUES ('0003_api')")
    assert sorted(_versions(url)) == ["0003_api", "0004_pipeline"]
    migrate.upgrade(url)
    assert _versions(url) == [migrate.script_directory().get_current_head()]
    assert _snapshot(url, columns) == before
    migrate.upgrade(url)  # and it stays repaired
    assert _versions(url) == [migrate.script_directory().get_current_head()]


def test_a_database_at_the_old_0004_without_0003_gets_the_0003_tables(
    empty_database_url: str,
) -> None:
    """The old history let a database reach 0004 by 0001, 0002, 0004; the new one says
    0003 came first, so its tables are created before the chain goes on."""
    url = empty_database_url
    migrate.upgrade(url, DATA_WALK_HEAD)
    _insert_data(url)
    for table in ("unmatched_provider_events", "deposit_addresses", "api_idempotency"):
        _fetch(url, f"DROP TABLE {table}")
    kept = {table: _columns(url, table) for table in ("merchants", "accounts", "payments")}
    before = _snapshot(url, kept)
    migrate.upgrade(url)
    assert _versions(url) == [migrate.script_directory().get_current_head()]
    assert EXPECTED_TABLES | {"api_idempotency", "deposit_addresses"} <= asyncio.run(_tables(url))
    assert _fetch(url, "SELECT count(*) AS n FROM api_idempotency")[0]["n"] == 0
    assert _snapshot(url, kept) == before


def test_a_refused_downgrade_changes_nothing_at_all(empty_database_url: str) -> None:
    """`--downgrade base` without --force runs no step above the first refusing one (no
    0011 … 0008 dropped, no operator limits with them), so a refusal never leaves a
    running service on a schema it cannot use: it rolls back every step, and the
    version, the columns and their data stay as they were."""
    url = empty_database_url
    migrate.upgrade(url, DATA_WALK_HEAD)
    _insert_data(url)  # a settlement account: 0004's downgrade refuses
    migrate.upgrade(url)
    head = migrate.script_directory().get_current_head()
    _fetch(url, "UPDATE assets SET max_payment = 1000.00 WHERE code = 'USD' RETURNING code")
    columns = {table: _columns(url, table) for table in (*DATA_TABLES, "assets")}
    before = _snapshot(url, columns)
    for target in ("base", "0003_api"):
        with pytest.raises(migrate.DataLossRefused, match="would lose data"):
            migrate.downgrade(url, target)
        assert _versions(url) == [head]
        assert {table: _columns(url, table) for table in columns} == columns
        assert _snapshot(url, columns) == before
    limit = _fetch(url, "SELECT max_payment FROM assets WHERE code = 'USD'")[0]["max_payment"]
    assert limit == 1000


def test_0008_refuses_to_drop_limits_an_operator_set(empty_database_url: str) -> None:
    """0008's downgrade does not drop the per-asset limits without asking, so the next
    upgrade never reseeds the defaults over them (a lowered limit coming back as 10^9)."""
    url = empty_database_url
    migrate.upgrade(url, "0008_money_limits")
    migrate.downgrade(url, "0007_pipeline_sweeps")  # defaults only: nothing to lose
    migrate.upgrade(url, "0008_money_limits")
    _fetch(url, "UPDATE assets SET max_withdrawal = 250.00 WHERE code = 'USD' RETURNING code")
    with pytest.raises(migrate.DataLossRefused, match="per-asset limits"):
        migrate.downgrade(url, "0007_pipeline_sweeps")
    assert _versions(url) == ["0008_money_limits"]
    row = _fetch(url, "SELECT max_withdrawal FROM assets WHERE code = 'USD'")[0]
    assert row["max_withdrawal"] == 250
    migrate.downgrade(url, "0007_pipeline_sweeps", force=True)
    assert "max_withdrawal" not in _columns(url, "assets")
