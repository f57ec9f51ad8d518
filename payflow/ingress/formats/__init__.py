"""The provider payload formats payflow accepts, one module each, and `parse_payload`.

Every format is a module with `NAME` (its id namespace, `payflow.ingress.ids`),
`claims(payload)` (is this body mine?) and `parse(payload, default_chain)` (its events).
`FORMATS` lists them in the order they are asked: the first that claims a body parses
it. A body no format claims is kept whole for review. Adding a format is a module here
and one line in `FORMATS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from payflow.ingress.formats import alchemy, generic
from payflow.ingress.ids import GENERIC
from payflow.ingress.payloads import ProviderEvent, kept_whole, separate_repeats

__all__ = ["FORMATS", "PayloadFormat", "parse_payload"]


@dataclass(frozen=True, slots=True)
class PayloadFormat:
    """One provider format: its namespace, which bodies it claims, how it reads them.

    `parse` takes the decoded body and the chain to assume when the body names none, and
    returns the delivery's events in order; it never raises on content (an activity it
    cannot credit is an event with a `problem`).
    """

    name: str
    claims: Callable[[dict[str, Any]], bool]
    parse: Callable[[dict[str, Any], str], list[ProviderEvent]]


# Asked in this order: an Alchemy body names its `type`; a generic one its `event_id`.
FORMATS: tuple[PayloadFormat, ...] = (
    PayloadFormat(alchemy.NAME, alchemy.claims, alchemy.parse),
    PayloadFormat(generic.NAME, generic.claims, generic.parse),
)


def parse_payload(payload: object, default_chain: str) -> list[ProviderEvent]:
    """The events of one signed delivery (a decoded JSON value), in delivery order.

    The first format in `FORMATS` that claims the body parses it; a body no format claims
    is kept whole for review (`invalid`, in the generic namespace). Two activities of one
    delivery never share an id (`separate_repeats`). Never raises on content.
    """
    if isinstance(payload, dict):
        for payload_format in FORMATS:
            if payload_format.claims(payload):
                return separate_repeats(payload_format.parse(payload, default_chain))
    detail = "body is neither a generic event nor an Alchemy ADDRESS_ACTIVITY"
    return separate_repeats([kept_whole(payload, default_chain, GENERIC, detail)])
