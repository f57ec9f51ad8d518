"""Operator redelivery: land a stored provider delivery again.

A kept event (`unknown_address`, `unknown_token`, `over_limit`, ...) was answered 202, so
the provider never resends it: once an operator assigns the address, registers the token
or raises the limit, the deposit would stay stranded on chain. `payflow unmatched replay
EVENT_ID` lands the exact bytes of that event's delivery (`provider_deliveries`) again,
through the same path as a provider's redelivery: what was credited before is a
`duplicate` and writes nothing, what can now be credited is recorded (pending event and
`ledger.event` outbox row in one transaction), the rest is kept as before. The old
unmatched row stays for the record.
"""

from __future__ import annotations

from typing import cast

import asyncpg

from payflow.config import DatabaseSettings, IngressSettings
from payflow.db.tx import transaction
from payflow.errors import BadInput, NotFound
from payflow.ingress.formats import parse_payload
from payflow.ingress.rawjson import NotJson, decode_body
from payflow.ingress.service import SQL, Delivery, Landing, land_event
from payflow.observability import new_trace_id


async def replay_unmatched(
    settings: IngressSettings, event_id: str, *, database: DatabaseSettings
) -> tuple[str, list[Landing]]:
    """Land the delivery of unmatched event `event_id` again; returns (trace id, landings).

    One transaction for the whole delivery, like the webhook route. Idempotent: a second
    replay lands only duplicates and kept rows. Raises `NotFound` when no unmatched row
    with that id holds a stored delivery, `BadInput` when its stored bytes are not a
    document the decoder accepts now (kept before duplicate keys were refused).
    """
    from payflow.db.pool import tool_pool

    trace_id = new_trace_id()
    async with tool_pool(database) as pool:
        async with pool.acquire() as proxy, transaction(proxy, database):
            conn = cast(asyncpg.Connection, proxy)  # the pool's proxy forwards every method
            body: bytes | None = await conn.fetchval(SQL["delivery_of_unmatched"], event_id)
            if body is None:
                raise NotFound(f"no stored delivery for unmatched event {event_id!r}")
            try:
                document = decode_body(body)
            except NotJson as error:  # kept before a stricter decoder (a key named twice)
                raise BadInput(
                    f"the stored delivery of {event_id!r} is not a JSON document payflow"
                    f" accepts now ({error}); it cannot be replayed"
                ) from None
            events = parse_payload(document, settings.default_chain)
            delivery = Delivery(body)
            landings = [
                await land_event(conn, event, trace_id, delivery=delivery) for event in events
            ]
    return trace_id, landings
