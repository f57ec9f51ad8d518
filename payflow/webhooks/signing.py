"""Standard Webhooks signatures: `v1,<base64 HMAC-SHA256(id.timestamp.body)>`."""

from __future__ import annotations

import base64
import hashlib
import hmac

SECRET_PREFIX = "whsec_"  # noqa: S105 - the spec's key prefix, not a secret


def secret_bytes(secret: str) -> bytes:
    """The HMAC key: a `whsec_<base64>` secret is decoded per the spec, else its UTF-8 bytes."""
    if secret.startswith(SECRET_PREFIX):
        return base64.b64decode(secret[len(SECRET_PREFIX) :])
    return secret.encode("utf-8")


def sign(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header value for one delivery attempt."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_bytes(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def verify(secret: str, webhook_id: str, timestamp: int, body: bytes, header: str) -> bool:
    """True when any `v1,` signature in `header` matches (constant-time compare)."""
    expected = sign(secret, webhook_id, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in header.split())


def signature_headers(secret: str, webhook_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers plus the content type."""
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, webhook_id, timestamp, body),
        "content-type": "application/json",
    }
