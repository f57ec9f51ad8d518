"""Migration 0032 (only the posting functions move money): `payflow migrate` and an upgrade
on its own give the app role the narrowed privileges, and the downgrade gives back exactly
those of 0029."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import pytest

from payflow.db import migrate
from tests.conftest import APP_ROLE, OWNER_ROLE, RUN_ID, _admin_execute, _url

PRIVILEGES = """
SELECT 'table ' || table_name || ' ' || privilege_type FROM information_schema.role_table_grants
WHERE grantee = $1 AND table_schema = 'public'
UNION ALL
SELECT 'column ' || table_name || '.' || column_name || ' ' || privilege_type
FROM information_schema.column_privileges
WHERE grantee = $1 AND table_schema = 'public'
UNION ALL
SELECT 'function ' || p.oid::regprocedure::text FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace AND has_function_privilege($1, p.oid, 'EXECUTE')
ORDER BY 1
"""


async def _privileges(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        return {row[0] for row in await conn.fetch(PRIVILEGES, APP_ROLE)}
    finally:
        await conn.close()


@pytest.fixture
def databases(db_roles: tuple[str, str]) -> Iterator[tuple[str, str]]:
    names = (f"payflow_test_{RUN_ID}_g30a", f"payflow_test_{RUN_ID}_g30b")
    yield _url(names[0]), _url(names[1])
    for name in names:
        asyncio.run(_admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def test_0032_narrows_the_app_role_and_its_downgrade_restores_0029s_grants(
    databases: tuple[str, str],
) -> None:
    at_head, at_0029 = databases
    migrate.migrate_database(at_head, owner=OWNER_ROLE, app=APP_ROLE)
    migrate.migrate_database(
        at_0029, owner=OWNER_ROLE, app=APP_ROLE, revision="0029_double_entry_books"
    )
    head = asyncio.run(_privileges(at_head))
    before = asyncio.run(_privileges(at_0029))
    # What 0032 takes back (0029 granted it) ...
    for privilege in (
        "table balance_events INSERT",
        "table ledger_legs INSERT",
        "table ledger_transfers INSERT",
        "table ledger_accounts INSERT",
        "table accounts INSERT",
        "column accounts.balance UPDATE",
        "column accounts.held UPDATE",
        "column accounts.initial_balance INSERT",
        "function ledger_post_opening(uuid,numeric)",
    ):
        assert privilege in before and privilege not in head, privilege
    # ... and what the service keeps.
    for privilege in (
        "column accounts.status UPDATE",
        "column accounts.asset INSERT",
        "table balance_events SELECT",
        "function ledger_post_success(text,text,text[],text[],text[],integer)",
        "function ledger_apply_balance_change(uuid,numeric,text,text,boolean)",
        "function ledger_place_hold(uuid,numeric)",
        "function ledger_release_payout_hold(uuid)",
    ):
        assert privilege in head, privilege

    # The downgrade alone (no `payflow migrate` after it) gives back 0029's privileges.
    migrate.downgrade(at_head, "0029_double_entry_books", owner_role=OWNER_ROLE)
    assert asyncio.run(_privileges(at_head)) == before
    # An upgrade on its own (no grant step) narrows them again.
    migrate.upgrade(at_head, owner_role=OWNER_ROLE)
    assert asyncio.run(_privileges(at_head)) == head
