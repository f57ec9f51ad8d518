"""Provider id namespaces: the stored id of a provider event is derived, never taken.

Every source owns a prefix, and payflow's own derived ids live elsewhere:

| stored id | meaning |
| --- | --- |
| `gen:<provider id>` | generic event id, when it is plain text and short enough |
| `gen-sha256:<64 hex>` | generic event id that is too long, or not printable ASCII without "/" |
| `alchemy:<tx>:<log index>`, `…:<trace address>`, `…:external` | Alchemy activity |
| `alchemy:<tx>:<category>:<32 hex>` | Alchemy activity without log index or trace |
| `alchemy-sha256:<64 hex>` | Alchemy id part that is too long or not plain (as above) |
| `<source>-review:<64 hex>` | unmatched row with no usable or no unambiguous provider id |
| `payment:<uuid>`, `wd:<hash>` | payflow's own (payment credits, withdrawals) |
| `chain:<transfer id>`, `reorg:<transfer id>` | payflow's own (chain deposit, its reversal) |

So an outsider's id can never equal an id payflow derives, and no prefix list has to
be refused. Every id fits `payment_events.event_id` (at most 200 characters).
"""

from __future__ import annotations

import hashlib
import re

MAX_EVENT_ID_LENGTH = 200
GENERIC = "gen"
ALCHEMY = "alchemy"
# Printable ASCII except "/": every stored id can be read back at /api/v1/events/{id}.
_PLAIN = re.compile(r"[\x21-\x2e\x30-\x7e]+", re.ASCII)


def _digest(*parts: bytes) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "big"))
        hasher.update(part)
    return hasher.hexdigest()


def namespaced(source: str, provider_id: str) -> str:
    """`<source>:<provider_id>`; or `<source>-sha256:<hex>` of the id when it would not
    fit 200 characters or is not plain printable ASCII without "/" (whitespace, control
    characters, NUL, non-ASCII, lone surrogates are hashed).

    Deterministic: the same provider id always gives the same stored id, and two
    different provider ids never give the same one (short of a SHA-256 collision).
    """
    stored = f"{source}:{provider_id}"
    if len(stored) <= MAX_EVENT_ID_LENGTH and _PLAIN.fullmatch(provider_id):
        return stored
    raw = provider_id.encode("utf-8", "surrogatepass")
    return f"{source}-sha256:{_digest(raw)}"


def review_id(source: str, *parts: str) -> str:
    """`<source>-review:<hex>`, the id of an unmatched row that has no usable provider id
    (parts: its content fingerprint and position in the delivery) or whose derived id
    is ambiguous (parts: the derived id, the content fingerprint and how many equal
    contents came before it in the delivery). Deterministic, so a redelivery maps
    onto the same row."""
    return f"{source}-review:{_digest(*(part.encode('utf-8', 'surrogatepass') for part in parts))}"
