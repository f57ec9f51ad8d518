"""The chaos cluster's start/stop guard: a restart racing the final teardown (Ctrl-C
during a fault) cannot leave a private server running after the run."""

from __future__ import annotations

import threading
import time

import pytest

from payflow_lab.chaos.cluster import ClusterError, Guard


def test_closing_waits_for_a_start_in_progress_then_refuses_new_starts() -> None:
    guard = Guard()
    events: list[str] = []
    inside = threading.Event()

    def restart() -> None:
        with guard.starting("server"):
            inside.set()
            time.sleep(0.3)
            events.append("started")

    thread = threading.Thread(target=restart)
    thread.start()
    inside.wait(5)
    with guard.closing():
        events.append("stopped")
    thread.join(5)
    assert events == ["started", "stopped"]  # the stop came after the start finished
    with pytest.raises(ClusterError, match="closed"), guard.starting("server"):
        events.append("started again")
    assert events == ["started", "stopped"]
