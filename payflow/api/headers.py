"""Headers that name one thing must be sent once.

Starlette's `request.headers[...]` (and FastAPI's `Header`) read the first of several
same-named headers and drop the rest silently. For a header that decides money or
identity that is an ambiguity a proxy or client bug can turn into the wrong answer: two
`Idempotency-Key`s made a payment under the first key (a retry carrying the second
created a second payment), two `X-API-Key`s authenticated as whichever came first, two
signature headers were judged by the first. Such a request is refused instead: 422
naming `header.Idempotency-Key`, 401 for the key and the provider's signature.
"""

from __future__ import annotations

from fastapi import Request

from .errors import FieldError

IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"


def sent_more_than_once(request: Request, name: str) -> bool:
    """True when the request carries header `name` (case-insensitive) more than once."""
    return len(request.headers.getlist(name)) > 1


def strip_ows(value: object) -> object:
    """A header value without the optional whitespace around it (RFC 9110 §5.5: it is not
    part of the value), for validators that run before a header's pattern."""
    return value.strip(" \t") if isinstance(value, str) else value


async def idempotency_key_once(request: Request) -> None:
    """Route dependency: several `Idempotency-Key` headers are a 422, before any work."""
    if sent_more_than_once(request, IDEMPOTENCY_KEY_HEADER):
        raise FieldError(f"header.{IDEMPOTENCY_KEY_HEADER}", "must be sent once")
