"""The real alert sink (issue 9): cooldown per key, bounded memory, the `alerts` table
and pluggable delivery. Jobs see only the `AlertSink` protocol of `payflow.ops.alerts`;
roles and the CLI build the sink with `build_alert_sink(settings, pool)`."""

from __future__ import annotations

import socket

import asyncpg

from payflow.config import AlertSettings, DatabaseSettings, SettingsError
from payflow.ops.alerting.delivery import (
    AlertDelivery,
    LogDelivery,
    PagerDutyDelivery,
    WebhookDelivery,
)
from payflow.ops.alerting.sink import CooldownAlertSink
from payflow.ops.alerting.store import AlertStore

__all__ = ["CooldownAlertSink", "build_alert_delivery", "build_alert_sink"]


def build_alert_delivery(settings: AlertSettings) -> AlertDelivery:
    """The delivery `ALERT_DELIVERY` names (log | webhook | pagerduty).

    Raises `SettingsError` naming the missing setting (ALERT_WEBHOOK_URL,
    ALERT_PAGERDUTY_ROUTING_KEY), so a misconfigured role stops at start-up.
    """
    if settings.alert_delivery == "webhook":
        settings.require("alert_webhook_url")
        assert settings.alert_webhook_url is not None
        return WebhookDelivery(settings.alert_webhook_url, settings.alert_timeout_s)
    if settings.alert_delivery == "pagerduty":
        secret = settings.alert_pagerduty_routing_key
        routing_key = secret.get_secret_value() if secret is not None else ""
        if not routing_key:
            raise SettingsError("setting ALERT_PAGERDUTY_ROUTING_KEY is required but missing")
        return PagerDutyDelivery(
            url=settings.alert_pagerduty_url,
            routing_key=routing_key,
            source=f"payflow@{socket.gethostname()}",
            timeout_s=settings.alert_timeout_s,
        )
    return LogDelivery()


def build_alert_sink(
    settings: AlertSettings,
    pool: asyncpg.Pool | None,
    *,
    database: DatabaseSettings | None = None,
) -> CooldownAlertSink:
    """The sink a role or CLI command passes to jobs (`JobContext.alerts`): records in the
    `alerts` table through `pool` (None: no table; with a pool, `database` bounds its
    transactions and is required) and delivers per `ALERT_DELIVERY`, with
    `ALERT_COOLDOWN_S` per key and at most `ALERT_MAX_KEYS` keys in memory.

    Build ONE per process and keep it for the process's life: the cooldown lives in it.
    Raises `SettingsError` when the chosen delivery lacks its setting, `ValueError` for a
    pool without the database slice.
    """
    store = None
    if pool is not None:
        if database is None:
            raise ValueError("an alert sink with a pool needs the database slice")
        store = AlertStore(pool, settings, database=database)
    return CooldownAlertSink(
        store=store,
        delivery=build_alert_delivery(settings),
        cooldown_s=settings.alert_cooldown_s,
        max_keys=settings.alert_max_keys,
    )
