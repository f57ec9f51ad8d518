"""The seeded fault schedule of a chaos run and its execution while the load runs.

`make_schedule(seed, duration_s)` lays out, from one seed:

* every 3-6 s a kill -9 of a worker or a relay (which one is drawn), restarted after a
  pause of 0.5-3 s;
* in every cycle of `CYCLE_S` seconds (the whole run when shorter), once each and at
  drawn offsets: kill -9 of the API (restarted after 0.5-2 s), a RabbitMQ restart, a
  PostgreSQL restart (crash: `-m immediate`), Redis down for 2-5 s, and, through the
  proxies, a stall (1-3 s) and a cut of every connection for PostgreSQL and RabbitMQ.

Faults may overlap (a relay killed while PostgreSQL restarts): that is the point. Each
executed fault leaves a `Window` (wall-clock start and end, the end including the time
to come back), which the verdict uses to explain dead letters.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from payflow_lab.chaos.cluster import Cluster
from payflow_lab.chaos.procs import Supervisor
from payflow_lab.chaos.proxy import ProxyThread

CYCLE_S = 45.0
RESTART_ALLOWANCE_S = 5.0  # a killed process needs about this long to serve again
MAJOR = (
    "kill_api",
    "restart_rabbitmq",
    "restart_postgres",
    "redis_down",
    "stall_postgres",
    "cut_postgres",
    "stall_rabbitmq",
    "cut_rabbitmq",
)


@dataclass(frozen=True, slots=True)
class Fault:
    """`kind` at `at` seconds into the load; `target` a process name; `seconds` a pause,
    stall or down window."""

    at: float
    kind: str
    target: str = ""
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Window:
    """When an executed fault was in effect (time.time() seconds)."""

    kind: str
    start: float
    end: float


def make_schedule(seed: int, duration_s: float) -> list[Fault]:
    """Every fault of a run whose load lasts about `duration_s` seconds, by time."""
    rng = random.Random(seed ^ 0x5EED)  # noqa: S311 - a reproducible schedule, not a secret
    faults: list[Fault] = []
    at = 2.0
    while at < duration_s:
        target = rng.choice(("worker-1", "worker-2", "relay-1", "relay-2"))
        faults.append(Fault(at, "kill9", target, rng.uniform(0.5, 3.0)))
        at += rng.uniform(3.0, 6.0)
    cycle_start = 0.0
    while cycle_start < duration_s:
        span = min(CYCLE_S, duration_s - cycle_start)
        if span < 10.0 and cycle_start > 0:
            break
        kinds = list(MAJOR)
        rng.shuffle(kinds)
        slots = [
            cycle_start + span * (0.1 + 0.8 * (i + rng.random()) / len(kinds))
            for i in range(len(kinds))
        ]
        for kind, when in zip(kinds, slots, strict=True):
            seconds = {
                "kill_api": rng.uniform(0.5, 2.0),
                "redis_down": rng.uniform(2.0, 5.0),
                "stall_postgres": rng.uniform(1.0, 3.0),
                "stall_rabbitmq": rng.uniform(1.0, 3.0),
            }.get(kind, 0.0)
            faults.append(Fault(when, kind, "api" if kind == "kill_api" else "", seconds))
        cycle_start += CYCLE_S
    return sorted(faults, key=lambda fault: fault.at)


@dataclass
class FaultRunner:
    """Executes a schedule against the run's cluster, proxies and processes."""

    cluster: Cluster
    proxies: ProxyThread
    supervisor: Supervisor
    windows: list[Window] = field(default_factory=list)
    done: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    async def _execute(self, fault: Fault) -> None:
        start = time.time()
        extra = 0.0
        kind = fault.kind
        try:
            if kind in ("kill9", "kill_api"):
                self.supervisor.kill9(fault.target, fault.seconds)
                await asyncio.sleep(fault.seconds)
                extra = RESTART_ALLOWANCE_S
            elif kind == "restart_rabbitmq":
                await asyncio.to_thread(self.cluster.rabbit.restart)
            elif kind == "restart_postgres":
                await asyncio.to_thread(self.cluster.pg.restart)
            elif kind == "redis_down":
                await asyncio.to_thread(self.cluster.redis.down)
                await asyncio.sleep(fault.seconds)
                await asyncio.to_thread(self.cluster.redis.start)
            elif kind.startswith("stall_"):
                await self.proxies.stall(kind.removeprefix("stall_"), fault.seconds)
            elif kind.startswith("cut_"):
                await self.proxies.cut(kind.removeprefix("cut_"))
        except Exception as error:  # a fault that fails to run is reported, not fatal
            self.errors.append(f"{kind}: {type(error).__name__}: {error}")
        self.windows.append(Window(kind, start, time.time() + extra))
        self.done[kind if kind != "kill9" else f"kill9_{fault.target.split('-')[0]}"] += 1

    async def run(self, schedule: list[Fault], stop: asyncio.Event) -> None:
        """Run each fault at its time until `stop` is set; wait for those in progress."""
        started = time.monotonic()
        tasks: list[asyncio.Task[None]] = []
        for fault in schedule:
            delay = started + fault.at - time.monotonic()
            if delay > 0:
                try:
                    await asyncio.wait_for(stop.wait(), timeout=delay)
                except TimeoutError:
                    pass
            if stop.is_set():
                break
            tasks.append(asyncio.create_task(self._execute(fault)))
        await asyncio.gather(*tasks)
