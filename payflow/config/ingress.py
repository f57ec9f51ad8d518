"""Provider webhooks (deposits reported by a chain provider): the HMAC secret, its header,
the body cap and the chain of events that name none (docs/ingress.md)."""

from __future__ import annotations

from pydantic import Field, field_validator

from payflow.config.base import Slice


class IngressSettings(Slice):
    """The `ingress` slice (`settings.ingress`); the module's docstring says what it covers."""

    slice_name = "ingress"

    provider_webhook_secret: str | None = None
    """HMAC secret of provider webhooks; at least 32 characters, required by the API."""
    provider_signature_header: str = "X-Alchemy-Signature"
    """Header carrying the provider's hex HMAC-SHA256."""
    provider_max_body_bytes: int = Field(default=2_097_152, ge=1024)
    """Body cap of the provider webhook alone (413 above). A refused delivery is retried unchanged
    until the provider gives up, losing its deposits, so keep it above the provider's largest
    batch (Alchemy sends about 1 KB per activity); activities are not counted, each one lands."""
    default_chain: str = Field(default="ETH_MAINNET", pattern=r"^[A-Z0-9_]{2,40}$")
    """Chain of generic provider events that do not name one."""

    @field_validator("provider_webhook_secret")
    @classmethod
    def _secret_long_enough(cls, value: str | None) -> str | None:
        if value is not None and len(value) < 32:
            raise ValueError("must be at least 32 characters")
        return value
