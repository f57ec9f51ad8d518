"""HMAC-SHA256 signatures over the raw request body, checked before any parsing."""

from __future__ import annotations

import hashlib
import hmac
import string

from payflow.config import IngressSettings, SettingsError

MIN_SECRET_LENGTH = 32
SIGNATURE_HEX_LENGTH = 64
_HEX = frozenset(string.hexdigits)


def require_secret(settings: IngressSettings) -> bytes:
    """The provider signing secret as bytes; `SettingsError` when missing or too short."""
    secret = settings.provider_webhook_secret
    if not secret:
        raise SettingsError("setting PROVIDER_WEBHOOK_SECRET is required but missing")
    if len(secret) < MIN_SECRET_LENGTH:
        raise SettingsError(
            f"setting PROVIDER_WEBHOOK_SECRET is too short: at least {MIN_SECRET_LENGTH} characters"
        )
    return secret.encode("utf-8")


def sign(body: bytes, secret: bytes) -> str:
    """The lower-case hex HMAC-SHA256 of `body` under `secret`."""
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(body: bytes, header: str | None, secret: bytes) -> bool:
    """True only when `header` is the hex HMAC-SHA256 of the exact bytes of `body`.

    Invariant: a missing, truncated, non-hex or wrong signature is False, never an
    exception; the comparison of well-formed signatures is constant-time.
    """
    if header is None:
        return False
    candidate = header.strip().lower()
    if len(candidate) != SIGNATURE_HEX_LENGTH or not _HEX.issuperset(candidate):
        return False
    return hmac.compare_digest(sign(body, secret).encode("ascii"), candidate.encode("ascii"))
