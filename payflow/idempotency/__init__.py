"""Idempotency keys that cannot be forged across field boundaries.

Each field is encoded as an 8-byte big-endian length followed by its UTF-8 bytes,
so ("a::b",) and ("a:", ":b") hash differently, and so do fields holding NUL.

`records.py` keeps the answers to requests made under an Idempotency-Key (the
`api_idempotency` table): payment creation and withdrawals store theirs with the work.
"""

from __future__ import annotations

import hashlib

__all__ = ["idempotency_key"]


def idempotency_key(*fields: str) -> str:
    """SHA-256 hex digest over the length-prefixed fields; injective in the field tuple."""
    digest = hashlib.sha256()
    digest.update(len(fields).to_bytes(8, "big"))
    for field in fields:
        encoded = field.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big"))
        digest.update(encoded)
    return digest.hexdigest()
