"""The root `Settings`: every slice composed, read once from the environment (and an
optional `.env`), each setting by its flat upper-case name.

The root inherits each slice's fields (so `DATABASE_URL` stays `DATABASE_URL`, and every
check and message is the slice's own) and hands out each slice as a frozen object of its
own class: `settings.database`, `settings.broker`, … A component takes its slice; only
the composition root (roles, the API's app factory, the CLI commands) holds the whole.

Local defaults work against the services on 127.0.0.1. A setting that is required by a
role but missing or invalid stops that process with one line naming it (see
`load_settings`), never a traceback.
"""

from __future__ import annotations

import sys
from typing import TypeVar

from pydantic import ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as SourceError

from payflow.config.alerts import AlertSettings
from payflow.config.api import ApiSettings
from payflow.config.base import SettingsError, Slice
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
from payflow.config.pipeline import PipelineSettings, default_credit_hold_s
from payflow.config.redis import RedisSettings
from payflow.config.retention import RetentionSettings
from payflow.config.webhooks import WebhookSettings

S = TypeVar("S", bound=Slice)

# Every slice, in the order the docs list them.
SLICES: tuple[type[Slice], ...] = (
    DatabaseSettings,
    RedisSettings,
    BrokerSettings,
    ApiSettings,
    IngressSettings,
    WebhookSettings,
    OutboxSettings,
    PipelineSettings,
    EmulatorSettings,
    JobsSettings,
    DlqSettings,
    RetentionSettings,
    ChainSettings,
    PayoutSettings,
    AlertSettings,
    ConsoleSettings,
    ObservabilitySettings,
)


class Settings(
    DatabaseSettings,
    RedisSettings,
    BrokerSettings,
    ApiSettings,
    IngressSettings,
    WebhookSettings,
    OutboxSettings,
    PipelineSettings,
    EmulatorSettings,
    JobsSettings,
    DlqSettings,
    RetentionSettings,
    ChainSettings,
    PayoutSettings,
    AlertSettings,
    ConsoleSettings,
    ObservabilitySettings,
    BaseSettings,
):
    """Every knob payflow has, composed of one slice per domain. Each setting's docstring
    (in its slice) is its description, from which docs/configuration.md is generated
    (`uv run python -m payflow.config_docs`)."""

    model_config = SettingsConfigDict(
        env_file=".env", extra="ignore", frozen=True, use_attribute_docstrings=True
    )

    def slice(self, kind: type[S]) -> S:
        """This configuration's slice of class `kind`, a frozen object holding that
        slice's settings alone (already checked here, so not validated again). Built on
        each access, never cached: a `model_copy(update=…)` of the root (as tests make)
        hands out slices of its own values."""
        return kind.model_construct(
            _fields_set=self.model_fields_set & set(kind.model_fields),
            **{name: getattr(self, name) for name in kind.model_fields},
        )

    @property
    def database(self) -> DatabaseSettings:
        """PostgreSQL: URLs, roles, pool, transaction bounds."""
        return self.slice(DatabaseSettings)

    @property
    def redis(self) -> RedisSettings:
        """Redis: its URL and key prefix."""
        return self.slice(RedisSettings)

    @property
    def broker(self) -> BrokerSettings:
        """RabbitMQ: URL, queue names and kind, prefetch, retry tiers."""
        return self.slice(BrokerSettings)

    @property
    def api(self) -> ApiSettings:
        """The HTTP API."""
        return self.slice(ApiSettings)

    @property
    def ingress(self) -> IngressSettings:
        """Provider webhooks."""
        return self.slice(IngressSettings)

    @property
    def webhooks(self) -> WebhookSettings:
        """Merchant webhooks."""
        return self.slice(WebhookSettings)

    @property
    def outbox(self) -> OutboxSettings:
        """The outbox relay."""
        return self.slice(OutboxSettings)

    @property
    def pipeline(self) -> PipelineSettings:
        """Workers and sweeps of the payment pipeline."""
        return self.slice(PipelineSettings)

    @property
    def emulator(self) -> EmulatorSettings:
        """The gateway emulator."""
        return self.slice(EmulatorSettings)

    @property
    def jobs(self) -> JobsSettings:
        """The scheduler, its checks and `payflow status`."""
        return self.slice(JobsSettings)

    @property
    def dlq(self) -> DlqSettings:
        """The Redis DLQ fallback and its drain."""
        return self.slice(DlqSettings)

    @property
    def retention(self) -> RetentionSettings:
        """Retention of finished rows and cleanup batches."""
        return self.slice(RetentionSettings)

    @property
    def chain(self) -> ChainSettings:
        """Chains, finality, deposits, scanner, chain recon."""
        return self.slice(ChainSettings)

    @property
    def payouts(self) -> PayoutSettings:
        """On-chain payouts."""
        return self.slice(PayoutSettings)

    @property
    def alerts(self) -> AlertSettings:
        """Alert delivery."""
        return self.slice(AlertSettings)

    @property
    def console(self) -> ConsoleSettings:
        """The web console."""
        return self.slice(ConsoleSettings)

    @property
    def observability(self) -> ObservabilitySettings:
        """Logs and metrics."""
        return self.slice(ObservabilitySettings)

    @model_validator(mode="after")
    def _held_credit_not_stale(self) -> Settings:
        """A held credit job is unpublished on purpose; it must not look stale. Unset,
        CREDIT_HOLD_S is derived from OUTBOX_STALE_ALERT_S (`default_credit_hold_s`); a
        hold set explicitly is checked."""
        if "credit_hold_s" not in self.model_fields_set:
            object.__setattr__(
                self, "credit_hold_s", default_credit_hold_s(self.outbox_stale_alert_s)
            )
        elif self.credit_hold_s >= self.outbox_stale_alert_s:
            raise ValueError(
                f"CREDIT_HOLD_S is invalid: must stay below OUTBOX_STALE_ALERT_S "
                f"({self.outbox_stale_alert_s:g})"
            )
        return self

    @model_validator(mode="after")
    def _direct_webhook_hold_below_stale_alert(self) -> Settings:
        """A direct send's webhook job is unpublished on purpose for its lease, then (after
        a failure) the first retry tier; it must not look stale."""
        if self.webhook_direct_send:
            held_s = self.webhook_lease_s + (
                self.retry_tiers_ms[0] / 1000 if self.retry_tiers_ms else 0
            )
            if held_s >= self.outbox_stale_alert_s:
                raise ValueError(
                    f"WEBHOOK_LEASE_S plus the first of RETRY_TIERS_MS ({held_s:g} s) must stay "
                    f"below OUTBOX_STALE_ALERT_S ({self.outbox_stale_alert_s:g}) while "
                    "WEBHOOK_DIRECT_SEND is on"
                )
        return self


def slice_of(name: str) -> str:
    """The slice (its attribute on `Settings`, such as `database`) that setting `name`
    (the field name, lower case) belongs to; `KeyError` for no setting."""
    for kind in SLICES:
        if name in kind.model_fields:
            return kind.slice_name
    raise KeyError(name)


def load_settings(**overrides: object) -> Settings:
    """Build settings from the environment; raise `SettingsError` with one line on failure."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(part) for part in first["loc"]).upper()
        message = str(first["msg"]).removeprefix("Value error, ")
        if not name:  # a check across settings: its message names them
            raise SettingsError(f"setting {message}") from None
        raise SettingsError(f"setting {name} is invalid: {message}") from None
    except SourceError as exc:
        raise SettingsError(str(exc).split(":")[0]) from None


def exit_on_settings_error(error: SettingsError) -> None:
    """Print the one-line reason and stop the process, with no traceback."""
    print(f"payflow: {error}", file=sys.stderr)
    raise SystemExit(2)
