"""Settings: local defaults work; a bad or missing setting is one clear line."""

from __future__ import annotations

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
