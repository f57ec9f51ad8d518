"""Which logins `payflow migrate` uses: the app role from DATABASE_URL, the migration URL."""

from __future__ import annotations

import pytest

from payflow.config import SettingsError, load_settings
from payflow.db import migrate


def test_migration_url_defaults_to_postgres_on_the_same_server_and_database() -> None:
    settings = load_settings(
        database_url="postgresql://svc:secret@db.internal:6543/pay?sslmode=require"
    )
    assert settings.migration_url() == "postgresql://postgres@db.internal:6543/pay?sslmode=require"
    ipv6 = load_settings(database_url="postgresql://svc@[::1]:5432/pay")
    assert ipv6.migration_url() == "postgresql://postgres@[::1]:5432/pay"


def test_explicit_migration_url_wins() -> None:
    settings = load_settings(
        database_url="postgresql://svc@db/pay",
        migration_database_url="postgresql://migrator:pw@db-direct/pay",
    )
    assert settings.migration_url() == "postgresql://migrator:pw@db-direct/pay"


def test_app_role_and_password_come_from_database_url() -> None:
    url = "postgresql://payflow%2Dapp:p%40ss%3Aword@127.0.0.1/payflow"
    assert migrate.login_role(url) == "payflow-app"
    assert migrate.login_password(url) == "p@ss:word"
    assert migrate.login_password("postgresql://payflow_app@127.0.0.1/payflow") is None
    with pytest.raises(ValueError, match="DATABASE_URL must name"):
        migrate.login_role("postgresql://127.0.0.1/payflow")


def test_database_url_can_be_moved_to_another_database() -> None:
    url = migrate.with_database("postgresql://postgres@h:1/payflow?x=1", "payflow_bench_1")
    assert url == "postgresql://postgres@h:1/payflow_bench_1?x=1"


@pytest.mark.parametrize("name", ["Payflow", "owner; DROP", "", "x" * 64])
def test_owner_role_name_is_a_plain_identifier(name: str) -> None:
    with pytest.raises(SettingsError, match="DB_OWNER_ROLE"):
        load_settings(db_owner_role=name)
