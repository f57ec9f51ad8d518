"""DLQ replay as the operator surfaces (API, console, `payflow dlq replay`) call it: the
machinery's `replay_dead_letter` with the replayer each domain exports for its source."""

from __future__ import annotations

import asyncpg

from payflow.config import DatabaseSettings
from payflow.dlq import Replayer
from payflow.dlq import replay_dead_letter as replay_with
from payflow.ledger.replay import replay_event
from payflow.payments.replay import replay_payment
from payflow.webhooks.dead import replay_webhook
from payflow.webhooks.endpoints import replay_delivery

REPLAYERS: dict[str, Replayer] = {
    "payment_event": replay_event,
    "payment": replay_payment,
    "webhook": replay_webhook,
    "endpoint_delivery": replay_delivery,
}


async def replay_dead_letter(
    pool: asyncpg.Pool, settings: DatabaseSettings, dlq_id: int, *, operator: str, reason: str = ""
) -> str:
    """Replay one DLQ row by hand (see `payflow.dlq.replay.replay_dead_letter`); returns
    the recorded resolution. `NotFound`, `Conflict` (already resolved), `BadInput`."""
    return await replay_with(
        pool, settings, dlq_id, operator=operator, replayers=REPLAYERS, reason=reason
    )
