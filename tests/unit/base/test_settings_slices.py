"""Settings per domain: every setting sits in exactly one slice under its flat environment
name, the root hands out frozen slices, coupled defaults are derived, and the settings
package imports no domain."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

from payflow import config_docs
from payflow.config import (
    SLICES,
    DatabaseSettings,
    Settings,
    SettingsError,
    WebhookSettings,
    load_settings,
    slice_of,
)

CONFIG = Path(__file__).resolve().parents[3] / "payflow" / "config"
ENV_EXAMPLE = Path(__file__).resolve().parents[3] / ".env.example"


def test_every_setting_belongs_to_exactly_one_slice() -> None:
    owners: dict[str, list[str]] = {}
    for kind in SLICES:
        for name in kind.model_fields:
            owners.setdefault(name, []).append(kind.slice_name)
    assert {name: slices for name, slices in owners.items() if len(slices) != 1} == {}
    assert set(owners) == set(Settings.model_fields)
    assert slice_of("webhook_timeout_s") == "webhooks"


def test_no_two_slices_share_a_validator_name() -> None:
    """The root inherits every slice: a validator named alike in two slices would silently
    replace the other's (a comma-separated list once went unsplit that way)."""
    seen: dict[str, str] = {}
    clashes = []
    for kind in SLICES:
        decorators = kind.__pydantic_decorators__
        for name in [*decorators.field_validators, *decorators.model_validators]:
            if name in seen:
                clashes.append((name, seen[name], kind.slice_name))
            seen[name] = kind.slice_name
    assert clashes == []


def test_the_root_hands_out_frozen_slices_holding_their_settings_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DB_POOL_MAX", "7")
    monkeypatch.setenv("WEBHOOK_ALLOW_HOSTS", "127.0.0.1,localhost")
    settings = load_settings()
    database = settings.database
    assert type(database) is DatabaseSettings
    assert database.db_pool_max == 7
    assert database.direct_url() == settings.database_url
    assert not hasattr(database, "rabbitmq_url")
    assert settings.webhooks.webhook_allow_hosts == ("127.0.0.1", "localhost")
    copied = settings.model_copy(update={"db_pool_max": 9})
    assert copied.database.db_pool_max == 9 and settings.database.db_pool_max == 7
    with pytest.raises(ValidationError):
        database.db_pool_max = 8  # type: ignore[misc]


def test_a_webhook_lease_left_unset_is_derived_from_the_send_timeout() -> None:
    assert load_settings().webhook_lease_s == 30.0  # the old default, at a 5 s timeout
    assert load_settings(webhook_timeout_s=25.0).webhook_lease_s == 50.0
    assert WebhookSettings(webhook_timeout_s=40.0).webhook_lease_s == 80.0
    with pytest.raises(SettingsError, match="setting WEBHOOK_LEASE_S is invalid: must exceed"):
        load_settings(webhook_timeout_s=40.0, webhook_lease_s=40.0)


def test_a_credit_hold_left_unset_is_derived_from_the_stale_alert() -> None:
    assert load_settings().credit_hold_s == 15.0
    assert load_settings(outbox_stale_alert_s=40.0, webhook_direct_send=False).credit_hold_s == 15
    assert load_settings(outbox_stale_alert_s=10.0, webhook_direct_send=False).credit_hold_s == 5
    with pytest.raises(SettingsError, match="setting CREDIT_HOLD_S is invalid: must stay below"):
        load_settings(outbox_stale_alert_s=10.0, credit_hold_s=15.0, webhook_direct_send=False)


def test_the_settings_package_imports_no_domain() -> None:
    """config is the base layer: a domain imports its slice, never the other way (the
    chain config and the xpub and NAT64 checks once imported payflow.chain / webhooks)."""
    imported = set()
    for path in CONFIG.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    payflow = sorted(m for m in imported if m.split(".")[0] == "payflow")
    assert [m for m in payflow if not m.startswith("payflow.config")] == []


def test_env_example_is_what_the_generator_writes() -> None:
    text = ENV_EXAMPLE.read_text(encoding="utf-8")
    assert text == config_docs.render_env()
    for name in Settings.model_fields:
        assert f"# {name.upper()}=" in text, name
