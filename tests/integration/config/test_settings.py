"""Settings: local defaults work; a bad or missing setting is one clear line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from payflow.config import SettingsError, load_settings


def test_defaults_point_at_local_services() -> None:
    settings = load_settings()
    assert settings.database_url.startswith("postgresql://")
    assert settings.lock_timeout_ms > 0


def test_short_provider_secret_is_refused_with_its_name() -> None:
    with pytest.raises(SettingsError, match="PROVIDER_WEBHOOK_SECRET"):
        load_settings(provider_webhook_secret="short")


def test_require_names_the_missing_setting() -> None:
    with pytest.raises(SettingsError, match="API_KEY"):
        load_settings(api_key=None).require("api_key")


def test_invalid_setting_stops_the_cli_with_one_line() -> None:
    env = {**os.environ, "DB_POOL_MIN": "not-a-number"}
    done = subprocess.run(
        [sys.executable, "-m", "payflow", "recon"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "payflow: setting DB_POOL_MIN is invalid: "
        "Input should be a valid integer, unable to parse string as an integer"
    ]
    assert "Traceback" not in done.stderr


def test_comma_separated_lists_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBHOOK_ALLOW_HOSTS", "127.0.0.1, localhost")
    monkeypatch.setenv("FIAT_CURRENCIES", "USD,EUR")
    settings = load_settings()
    assert settings.webhook_allow_hosts == ("127.0.0.1", "localhost")
    assert settings.fiat_currencies == ("USD", "EUR")


def test_a_webhook_lease_must_outlast_the_send() -> None:
    with pytest.raises(SettingsError, match="WEBHOOK_LEASE_S"):
        load_settings(webhook_timeout_s=10.0, webhook_lease_s=10.0)
    assert load_settings(webhook_timeout_s=10.0, webhook_lease_s=10.5).webhook_lease_s == 10.5


def test_a_held_credit_job_must_not_look_stale() -> None:
    with pytest.raises(SettingsError, match="CREDIT_HOLD_S"):
        load_settings(outbox_stale_alert_s=60.0, credit_hold_s=60.0)
    assert load_settings(outbox_stale_alert_s=60.0, credit_hold_s=59.0).credit_hold_s == 59.0
    assert load_settings(credit_hold_s=0).credit_hold_s == 0  # the relay posts every credit


def test_a_direct_webhook_hold_must_stay_below_the_stale_outbox_alert() -> None:
    """The held webhook job (lease, then the first retry tier) must not read as stale."""
    with pytest.raises(SettingsError, match="OUTBOX_STALE_ALERT_S"):
        load_settings(webhook_lease_s=59.0, retry_tiers_ms=(2000,), outbox_stale_alert_s=60.0)
    assert load_settings(webhook_lease_s=57.0, retry_tiers_ms=(2000,)).webhook_lease_s == 57.0
    off = load_settings(webhook_lease_s=59.0, webhook_direct_send=False)
    assert off.webhook_lease_s == 59.0


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("RABBITMQ_URL", "garbage", "must be a URL starting with amqp:// or amqps://"),
        ("RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:99999/", "port"),
        ("RABBITMQ_URL", "amqp:///vhost", "names no host"),
        ("REDIS_URL", "garbage", "must be a URL starting with redis://"),
        ("REDIS_URL", "redis://127.0.0.1:0/0", "port"),
        ("DATABASE_URL", "mysql://root@127.0.0.1/payflow", "postgresql://"),
        ("DATABASE_URL", "postgresql://u@127.0.0.1:70000/payflow", "port"),
        ("MIGRATION_DATABASE_URL", "127.0.0.1:5432", "postgresql://"),
        ("DATABASE_DIRECT_URL", "postgresql://u@h:x/db", "port"),
        ("ETH_RPC_URL", "http://:8545", "names no host"),
        ("ALERT_PAGERDUTY_URL", "https://events.pagerduty.com:99999/v2", "port"),
        ("EVM_CHAINS", '{"BASE_MAINNET": {"rpc_url": "ftp://x"}}', "BASE_MAINNET.rpc_url"),
        ("EVM_CHAINS", '{"BASE_MAINNET": {"rpc_url": "http://h:99999"}}', "BASE_MAINNET.rpc_url"),
    ],
)
def test_a_malformed_service_url_stops_every_role_with_one_line(
    name: str, value: str, reason: str
) -> None:
    """RABBITMQ_URL=garbage must not make `payflow relay` and `worker` retry forever and
    ignore SIGTERM, nor `status` print a traceback; REDIS_URL=garbage must not make
    `payflow api` print one. Every service URL is checked whole at start-up, and the line
    names the setting, never the URL (it may hold a password)."""
    with pytest.raises(SettingsError, match=name) as refused:
        load_settings(**{name.lower(): orjson_loads_if_json(value)})
    assert reason in str(refused.value)
    assert value not in str(refused.value) or name == "EVM_CHAINS"
    env = {**os.environ, name: value}
    done = subprocess.run(
        [sys.executable, "-m", "payflow", "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"payflow: setting {name}"), lines


def orjson_loads_if_json(value: str) -> object:
    return json.loads(value) if value.startswith("{") else value


def test_well_formed_service_urls_pass() -> None:
    settings = load_settings(
        database_url="postgresql://app:pw@db.internal:6432/payflow?sslmode=require",
        migration_database_url="postgresql:///payflow?host=/var/run/postgresql",
        redis_url="unix:///var/run/redis.sock",
        rabbitmq_url="amqps://u:p@mq.internal/vhost",
        eth_rpc_url="https://node.internal:8545",
    )
    assert settings.rabbitmq_url == "amqps://u:p@mq.internal/vhost"


@pytest.mark.parametrize("value", ["", " , ", "usd", "USD,EURO", "US1"])
def test_fiat_currencies_name_iso_codes(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """FIAT_CURRENCIES names upper-case three-letter ISO codes: an empty list, a blank
    entry, lower case or a code of another length is refused at start-up."""
    monkeypatch.setenv("FIAT_CURRENCIES", value)
    with pytest.raises(SettingsError, match="FIAT_CURRENCIES"):
        load_settings()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BROKER_PREFIX", "a b/#*"),
        ("BROKER_PREFIX", "p" * 300),
        ("DEFAULT_CHAIN", "bad chain"),
        ("WEBHOOK_ALLOW_HOSTS", "http://a b"),
        ("LOG_LEVEL", "LOUD"),
        ("METRICS_HOST", "not a host"),
        ("API_HOST", "not a host"),
        ("RETRY_TIERS_MS", "abc"),
    ],
)
def test_settings_a_tester_found_unchecked_are_one_line(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad value (BROKER_PREFIX='a b/#*' among them) is one clear settings error at
    load, never a crash in the broker client or a value taken silently to fail later."""
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=f"setting {name} is invalid"):
        load_settings()


def test_well_formed_hosts_and_levels_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBHOOK_ALLOW_HOSTS", "127.0.0.1,localhost,[::1],hooks.example.com")
    monkeypatch.setenv("LOG_LEVEL", "debug")
    monkeypatch.setenv("API_HOST", "::1")
    settings = load_settings()
    assert settings.webhook_allow_hosts == ("127.0.0.1", "localhost", "[::1]", "hooks.example.com")
    assert settings.log_level == "debug"
