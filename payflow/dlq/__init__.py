"""The dead-letter queue: rows in PostgreSQL (`records.py`), the Redis fallback while
PostgreSQL is unreachable (`fallback.py`) and its drain through the dead-letterers the
domains export (`drain.py`), and audited manual replay through the replayers the domains
export (`replay.py`). Imports only the base, the broker's message type and the job and
alert machinery; the domains record into it, the composition root wires the replayers
and the dead-letterers."""

from payflow.dlq.drain import DeadLetterer, drain_fallback
from payflow.dlq.fallback import DlqFallback
from payflow.dlq.records import (
    FALLBACK_MARK,
    SOURCES,
    DeadLetter,
    fallback_entry_recorded,
    get_dead_letter,
    list_dead_letters,
    record_dead_letter,
)
from payflow.dlq.replay import Replayer, replay_dead_letter

__all__ = [
    "FALLBACK_MARK",
    "SOURCES",
    "DeadLetter",
    "DeadLetterer",
    "DlqFallback",
    "Replayer",
    "drain_fallback",
    "fallback_entry_recorded",
    "get_dead_letter",
    "list_dead_letters",
    "record_dead_letter",
    "replay_dead_letter",
]
