"""Settings for PgBouncer in transaction pooling: the statement cache and the direct URL."""

from __future__ import annotations

import pytest

from payflow.config import SettingsError, load_settings


def test_direct_url_defaults_to_database_url() -> None:
    settings = load_settings(database_url="postgresql://app@bouncer:6432/payflow")
    assert settings.database_direct_url is None
    assert settings.direct_url() == "postgresql://app@bouncer:6432/payflow"


def test_direct_url_is_used_for_the_session_when_set() -> None:
    settings = load_settings(
        database_url="postgresql://app@bouncer:6432/payflow",
        database_direct_url="postgresql://app@db:5432/payflow",
    )
    assert settings.direct_url() == "postgresql://app@db:5432/payflow"
    assert settings.database_url == "postgresql://app@bouncer:6432/payflow"


def test_statement_cache_defaults_to_100_and_may_be_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DB_STATEMENT_CACHE_SIZE", raising=False)
    assert load_settings().db_statement_cache_size == 100
    monkeypatch.setenv("DB_STATEMENT_CACHE_SIZE", "0")
    assert load_settings().db_statement_cache_size == 0


def test_negative_statement_cache_is_refused_with_its_name() -> None:
    with pytest.raises(SettingsError, match="DB_STATEMENT_CACHE_SIZE"):
        load_settings(db_statement_cache_size=-1)
