"""Several database hosts and several broker nodes in the settings: libpq's multi-host
DSN is accepted (each host checked), the migration login keeps every host, RABBITMQ_URLS
is a comma-separated list of checked URLs, and a bad entry stops start-up in one line."""

from __future__ import annotations

import pytest

from payflow.config import SettingsError, load_settings
from payflow.config.base import url_hosts

DSN = "postgresql://payflow_app:pw@10.0.0.1:5432,10.0.0.2:5433/payflow?target_session_attrs=read-write"


def test_a_multi_host_dsn_is_accepted_and_the_migration_login_keeps_every_host() -> None:
    settings = load_settings(database_url=DSN)
    assert settings.database_url == DSN
    assert settings.database.migration_url() == (
        "postgresql://postgres@10.0.0.1:5432,10.0.0.2:5433/payflow?target_session_attrs=read-write"
    )
    assert url_hosts(DSN) == [("10.0.0.1", "5432"), ("10.0.0.2", "5433")]
    assert url_hosts("postgresql://u@[::1]:5432,db/x") == [("::1", "5432"), ("db", None)]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://u@h1:5432,h2:99999/db", "port that is not a number"),
        ("postgresql://u@h1:5432,h2:x/db", "port that is not a number"),
        ("postgresql://u@h1,,h2/db", "empty host"),
    ],
)
def test_a_bad_host_in_the_list_is_refused_in_one_line(url: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message) as caught:
        load_settings(database_url=url)
    assert "DATABASE_URL" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_rabbitmq_urls_are_a_list_of_checked_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RABBITMQ_URLS", "amqp://g:g@mq1:5672/, amqp://g:g@mq2:5672/")
    settings = load_settings()
    assert settings.broker.broker_urls() == ("amqp://g:g@mq1:5672/", "amqp://g:g@mq2:5672/")
    assert load_settings(rabbitmq_urls=()).broker.broker_urls() == (settings.rabbitmq_url,)
    monkeypatch.setenv("RABBITMQ_URLS", "amqp://g:g@mq1:5672/,http://mq2/")
    with pytest.raises(SettingsError, match="RABBITMQ_URLS"):
        load_settings()
