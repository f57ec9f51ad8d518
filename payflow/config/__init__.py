"""Settings per domain, composed into one root read from the environment.

`Settings` (the root) holds every setting by its flat environment name and hands each
component its slice: `settings.database` (`DatabaseSettings`), `settings.redis`,
`settings.broker`, `settings.api`, `settings.ingress`, `settings.webhooks`,
`settings.outbox`, `settings.pipeline`, `settings.emulator`, `settings.jobs`,
`settings.dlq`, `settings.retention`, `settings.chain`, `settings.payouts`,
`settings.alerts`, `settings.console`, `settings.observability`. The root is also an
instance of every slice class, so tests may hand it where a slice is taken.

This package imports nothing from payflow's domains; they import their slice from it.
"""

from payflow.config.alerts import AlertSettings
from payflow.config.api import ApiSettings
from payflow.config.base import (
    HOST_NAME,
    HOSTLESS_SCHEMES,
    SERVICE_URL_SCHEMES,
    SettingsError,
    Slice,
    SliceSource,
    check_service_url,
    is_host,
)
from payflow.config.broker import BrokerSettings
from payflow.config.chain import ChainSettings
from payflow.config.console import ConsoleSettings
from payflow.config.database import DatabaseSettings
from payflow.config.dlq import DlqSettings
from payflow.config.emulator import EmulatorSettings
from payflow.config.ingress import IngressSettings
from payflow.config.jobs import JobsSettings
from payflow.config.observability import ObservabilitySettings
from payflow.config.outbox import OutboxSettings
from payflow.config.payouts import PayoutSettings
from payflow.config.pipeline import PipelineSettings
from payflow.config.redis import RedisSettings
from payflow.config.retention import RetentionSettings
from payflow.config.settings import (
    SLICES,
    Settings,
    exit_on_settings_error,
    load_settings,
    slice_of,
)
from payflow.config.webhooks import WebhookSettings

__all__ = [
    "HOSTLESS_SCHEMES",
    "HOST_NAME",
    "SERVICE_URL_SCHEMES",
    "SLICES",
    "AlertSettings",
    "ApiSettings",
    "BrokerSettings",
    "ChainSettings",
    "ConsoleSettings",
    "DatabaseSettings",
    "DlqSettings",
    "EmulatorSettings",
    "IngressSettings",
    "JobsSettings",
    "ObservabilitySettings",
    "OutboxSettings",
    "PayoutSettings",
    "PipelineSettings",
    "RedisSettings",
    "RetentionSettings",
    "Settings",
    "SettingsError",
    "Slice",
    "SliceSource",
    "WebhookSettings",
    "check_service_url",
    "exit_on_settings_error",
    "is_host",
    "load_settings",
    "slice_of",
]
