"""What every settings slice shares: the one-line error, the checks of a service URL and
of a host, comma-separated lists, and `Slice`, the frozen base of each domain's settings.

This module (like all of `payflow.config`) imports nothing from payflow's domains: they
import their slice from here.
"""

from __future__ import annotations

import ipaddress
import re
from typing import ClassVar, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict

# A host name of RFC 1123 labels; IP literals are judged by `ipaddress` (`is_host`).
HOST_NAME = re.compile(
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
    r"[A-Za-z0-9])?)*\.?"
)


def is_host(value: str) -> bool:
    """True for an IPv4 / IPv6 literal or a host name: what a bind address or an
    allow-listed webhook host can be."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return HOST_NAME.fullmatch(value) is not None
    return True


# The schemes each service URL accepts; a host is required unless the scheme allows a
# socket path (libpq's `host=` query, redis `unix://`).
SERVICE_URL_SCHEMES: dict[str, tuple[str, ...]] = {
    "database_url": ("postgresql", "postgres"),
    "database_direct_url": ("postgresql", "postgres"),
    "migration_database_url": ("postgresql", "postgres"),
    "redis_url": ("redis", "rediss", "unix"),
    "rabbitmq_url": ("amqp", "amqps"),
    "eth_rpc_url": ("http", "https"),
    "alert_webhook_url": ("http", "https"),
    "alert_pagerduty_url": ("http", "https"),
}
HOSTLESS_SCHEMES = frozenset({"postgresql", "postgres", "unix"})


def check_service_url(url: str, schemes: tuple[str, ...]) -> None:
    """Raise `ValueError` (its message names what is wrong, never the URL, which may
    hold a password) unless `url` has one of `schemes`, a host (or a scheme that
    allows a socket path) and a port within 1-65535 when one is given."""
    parts = urlsplit(url)
    if parts.scheme not in schemes:
        raise ValueError(f"must be a URL starting with {' or '.join(s + '://' for s in schemes)}")
    if parts.scheme in HOSTLESS_SCHEMES and "," in parts.netloc:
        # libpq's multi-host form (postgresql://h1:5432,h2:5432/db): each host is checked.
        for host, port_text in url_hosts(url):
            if not host:
                raise ValueError("names an empty host in its list of hosts")
            _check_port(port_text)
        return
    try:
        port = parts.port
    except ValueError:
        raise ValueError("has a port that is not a number within 1-65535") from None
    if port == 0:
        raise ValueError("has a port that is not a number within 1-65535")
    if not parts.hostname and parts.scheme not in HOSTLESS_SCHEMES:
        raise ValueError("names no host")


def _check_port(port_text: str | None) -> None:
    if port_text is None:
        return
    if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        raise ValueError("has a port that is not a number within 1-65535")


def url_hosts(url: str) -> list[tuple[str, str | None]]:
    """The `(host, port)` pairs of a URL's authority, several for libpq's multi-host form
    (`postgresql://u@h1:5432,h2/db`): the port as written (None when absent), an IPv6
    literal without its brackets."""
    netloc = urlsplit(url).netloc.rpartition("@")[2]
    hosts: list[tuple[str, str | None]] = []
    for item in netloc.split(","):
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else None
        else:
            host, colon, port_text = item.partition(":")
            port = port_text if colon else None
        hosts.append((host, port))
    return hosts


def with_user(url: str, userinfo: str) -> str:
    """`url` logging in as `userinfo` (`user` or `user:password`, already quoted), every
    host of its authority kept (libpq's multi-host form included)."""
    parts = urlsplit(url)
    hosts = parts.netloc.rpartition("@")[2]
    netloc = f"{userinfo}@{hosts}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def service_url(value: str | None, field_name: str | None) -> str | None:
    """A service URL checked whole at start-up (scheme, host, port; `check_service_url`),
    so a typo stops the process with one line naming the setting instead of surfacing
    later as a client library's traceback or an endless reconnect loop."""
    if value is None:
        return None
    check_service_url(value, SERVICE_URL_SCHEMES[str(field_name)])
    return value


def split_csv(value: object) -> object:
    """A comma-separated environment value as a tuple of its non-empty, stripped parts
    (anything else unchanged, for pydantic to judge)."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


class SettingsError(Exception):
    """A setting is missing or invalid; the message names it in one line."""


class Slice(BaseModel):
    """One domain's settings: frozen, each field's docstring its description (rendered
    into docs/configuration.md). The root `Settings` inherits every slice's fields, so
    each keeps its flat environment name (the field name, upper case); `settings.<slice>`
    hands a component its slice alone."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    #: The attribute of the root `Settings` holding this slice (`settings.database`).
    slice_name: ClassVar[str] = ""
    #: Settings whose default is derived from another setting when left unset: the rule,
    #: as docs/configuration.md shows it in place of a default.
    derived_defaults: ClassVar[dict[str, str]] = {}

    def require(self, *names: str) -> None:
        """Raise `SettingsError` naming the first of `names` that is unset."""
        for name in names:
            if getattr(self, name) in (None, ""):
                raise SettingsError(f"setting {name.upper()} is required but missing")


S = TypeVar("S", bound=Slice)


class SliceSource(Protocol):
    """What hands out slices by class: the root `Settings` (`settings.slice(DatabaseSettings)`).
    A component that is handed a source rather than its slices (a job's `JobContext`)
    takes from it, by class, the slices it reads and nothing else."""

    def slice(self, kind: type[S]) -> S:
        """This configuration's slice of class `kind`."""
        ...
