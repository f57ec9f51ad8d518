"""The HTTP API: keys, where uvicorn binds, slow-client bounds, body caps, rate limits
and the currencies merchant payments accept (docs/api.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from payflow.config.base import Slice, is_host, split_csv


class ApiSettings(Slice):
    """The `api` slice (`settings.api`); the module's docstring says what it covers."""

    slice_name = "api"

    api_key: str | None = None
    """Bootstrap merchant key for local runs and tests (its merchant's `default` write key)."""
    admin_api_key: str | None = None
    """Operator key for admin endpoints (its merchant's `default` write key)."""
    api_host: str = "127.0.0.1"
    """Address the API's uvicorn binds."""
    api_port: int = Field(default=8000, ge=1, le=65535)
    """Port the API's uvicorn listens on."""
    api_workers: int = Field(default=1, ge=1)
    """How many uvicorn worker processes serve the API."""
    api_header_timeout_s: float = Field(default=10.0, gt=0, le=300)
    """A request's head must arrive within this many seconds of the connection's start (of its
    first byte on a keep-alive connection), however slowly it trickles; else 408 and the
    connection is closed (docs/operations.md, slow clients)."""
    api_body_timeout_s: float = Field(default=30.0, gt=0, le=600)
    """A request's body must arrive within this many seconds of its head; else the connection is
    closed."""
    api_max_connections: int = Field(default=0, ge=0)
    """Open connections per API process; 0: the open-file limit (raised to the hard limit at start)
    less 128 for pools and logs. At the cap a new connection evicts the one that has waited
    longest for its request head, else it gets 503."""
    # NoDecode: comma-separated env values go to `_split_csv`, not the JSON decoder.
    fiat_currencies: Annotated[tuple[str, ...], NoDecode] = ("RUB", "USD", "EUR")
    """Comma-separated currencies merchant payments accept: ISO 4217 codes, each with an `assets`
    row (the API refuses to start, naming the ones without)."""
    max_body_bytes: int = Field(default=65536, ge=1024)
    """Request body cap (413 above)."""
    max_metadata_bytes: int = Field(default=4096, ge=2)
    """Cap on a payment's `metadata` JSON."""
    rate_limit_per_minute: int = Field(default=60000, ge=1)
    """Requests per client per minute (429 above)."""
    auth_failures_per_minute: int = Field(default=120, ge=1)
    """X-API-Keys that resolve to no merchant, per client address per minute; above it that
    address's unresolved keys are 429 before any database lookup."""
    api_auth_cache_seconds: float = Field(default=30.0, ge=0)
    """How long a process caches a resolved API key (0 disables), never past the key's expiry; a
    key revoked elsewhere keeps working in this process at most that long."""
    api_ready_timeout_seconds: float = Field(default=2.0, gt=0)
    """Timeout of each `/ready` check."""

    @field_validator("fiat_currencies", mode="before")
    @classmethod
    def _api_split_csv(cls, value: object) -> object:
        return split_csv(value)

    @field_validator("fiat_currencies")
    @classmethod
    def _fiat_currencies_named(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """At least one ISO 4217 code: with none, no payment could ever be accepted."""
        if not value:
            raise ValueError("must name at least one currency, such as USD")
        for code in value:
            if not (len(code) == 3 and code.isascii() and code.isalpha() and code.isupper()):
                raise ValueError(f"{code!r} is not an ISO 4217 code such as USD")
        return value

    @field_validator("api_host")
    @classmethod
    def _api_bind_host_valid(cls, value: str) -> str:
        """A bind address is a host name or an IP literal (checked before any bind)."""
        if not is_host(value):
            raise ValueError(f"{value!r} is not a host name or IP address")
        return value
