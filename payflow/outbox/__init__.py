"""The outbox (machinery): writes with NOTIFY, the relay (domains hook it through
`PublishHook`), the after-commit waker, retention and stale alerts (`JOBS`).

The names other packages use; import them from here or from their module."""

from payflow.outbox.maintenance import JOBS
from payflow.outbox.relay import PublishHook, run_relay
from payflow.outbox.sweep import SweepReport, sweep, sweep_result
from payflow.outbox.waker import RelayWaker
from payflow.outbox.writer import enqueue, release_held_job

__all__ = [
    "JOBS",
    "PublishHook",
    "RelayWaker",
    "SweepReport",
    "enqueue",
    "release_held_job",
    "run_relay",
    "sweep",
    "sweep_result",
]
