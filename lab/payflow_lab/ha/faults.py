"""The faults of `payflow chaos --ha`: what losing a machine does, one kind at a time,
each measured and then healed so the next starts from a whole topology.

Kinds (`KINDS`), each a coroutine over the running `Lab`:

* `pg_primary_kill9`: SIGKILL to the primary's postgres and pg_autoctl; the monitor
  promotes the synchronous standby; the killed node's keeper is run again and rejoins as
  the new standby.
* `pg_primary_cut`: the primary's host loses its network (link down: packets dropped,
  no RST) for `cut_s`, longer than pg_autoctl's `network_partition_timeout` (20 s), so
  the isolated primary has demoted itself before it is reachable again.
* `mq_node_kill9`: SIGKILL to a RabbitMQ node that leads no payflow work queue, then
  booted again.
* `mq_leader_kill9`: the same to the node leading `payflow.payments`.
* `api_host_kill9`: one API host of the two behind HAProxy loses every process, then
  its API is started again.
* `worker_host_cut`: one worker host loses its network for `worker_cut_s` while charges
  are in flight (the gateway takes 0.2-1 s a call), then gets it back.

Each fault records `rto_s`: for the database kinds the seconds until a write commits
again through the multi-host DSN (no writable primary before), for the broker kinds the
seconds until a publish to a quorum queue is confirmed again (no majority with a
leader before), for the others the longest stretch without a 2xx answer at HAProxy.
`healed_s` is when the topology was whole again (replicating, three broker nodes).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import aio_pika
import asyncpg

from payflow_lab.ha.netns import Host
from payflow_lab.ha.procs import kill9_host, port_check, wait_for
from payflow_lab.ha.topology import API_PORT, Lab

KINDS = (
    "pg_primary_kill9",
    "pg_primary_cut",
    "mq_node_kill9",
    "mq_leader_kill9",
    "api_host_kill9",
    "worker_host_cut",
)
WORK_QUEUE = "payflow.payments"
PROBE_QUEUE = "payflow-lab.ha-probe"  # one per broker fault, numbered
PROBE_EVERY_S = 0.25
RTO_LIMIT_S = 180.0
HEAL_LIMIT_S = 240.0


@dataclass(frozen=True, slots=True)
class FaultRecord:
    """One executed fault: kind, the host it hit, when (time.time()), its figures."""

    kind: str
    host: str
    start: float
    rto_s: float | None  # None: the service did not come back within RTO_LIMIT_S
    healed_s: float | None  # None: the lab was not whole again within HEAL_LIMIT_S
    error: str = ""


def cycle(seed: int, number: int) -> list[str]:
    """The kinds of cycle `number` (0-based), each once, in an order drawn from `seed`."""
    kinds = list(KINDS)
    random.Random(seed * 1009 + number).shuffle(kinds)  # noqa: S311 - a schedule
    return kinds


PG_ERRORS = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)


async def _write_on(url: str) -> bool:
    """True when `url` (one host) is a primary and a write transaction commits there."""
    conn: asyncpg.Connection | None = None
    try:
        conn = await asyncpg.connect(url, timeout=2)
        if await conn.fetchval("SELECT pg_is_in_recovery()", timeout=2):
            return False
        # An xid makes the commit write a record (and wait for a synchronous standby
        # when the primary has one, as every payflow commit does).
        await conn.fetchval("SELECT txid_current()", timeout=2)
        return True
    except PG_ERRORS:
        return False
    finally:
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.terminate()


async def writable_after(urls: Sequence[str], started: float) -> float | None:
    """Seconds from `started` (monotonic) until a write commits on one of `urls` (each
    host asked alone, each within its own 2 s, so a silent host cannot spend the
    others' time), or None after RTO_LIMIT_S."""
    while time.monotonic() - started < RTO_LIMIT_S:
        answers = await asyncio.gather(*(_write_on(url) for url in urls))
        if any(answers):
            return time.monotonic() - started
        await asyncio.sleep(PROBE_EVERY_S)
    return None


async def declare_probe(url: str, name: str) -> None:
    """Declare quorum queue `name` through `url`'s node, which becomes its leader
    (`x-queue-leader-locator: client-local`)."""
    connection = await aio_pika.connect(url, timeout=5)
    async with connection:
        channel = await connection.channel()
        await channel.declare_queue(
            name,
            durable=True,
            arguments={"x-queue-type": "quorum", "x-queue-leader-locator": "client-local"},
            timeout=5,
        )


async def _publish_confirmed(urls: Sequence[str], queue: str) -> bool:
    for url in urls:
        try:
            connection = await aio_pika.connect(url, timeout=2)
        except (OSError, TimeoutError, aio_pika.exceptions.AMQPError):
            continue
        try:
            channel = await connection.channel(publisher_confirms=True)
            await channel.default_exchange.publish(
                aio_pika.Message(b"probe", delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                routing_key=queue,
                mandatory=True,
                timeout=2,
            )
            return True
        except (OSError, TimeoutError, aio_pika.exceptions.AMQPError, RuntimeError):
            continue
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(connection.close(), 2)
    return False


async def confirmed_after(urls: Sequence[str], queue: str, started: float) -> float | None:
    """Seconds from `started` until a persistent publish to quorum queue `queue` is
    confirmed through one of `urls`, or None after RTO_LIMIT_S."""
    while time.monotonic() - started < RTO_LIMIT_S:
        if await _publish_confirmed(urls, queue):
            return time.monotonic() - started
        await asyncio.sleep(PROBE_EVERY_S)
    return None


def longest_gap(times: Sequence[float], start: float, end: float) -> float:
    """The longest stretch inside [start, end] (monotonic) with no time in `times`,
    counted only while there were times: after the last one (the load ended) nothing
    is a gap."""
    last = max(times, default=start)
    end = min(end, max(last, start))
    inside = sorted(t for t in times if start <= t <= end)
    marks = [start, *inside, end]
    return max((b - a for a, b in itertools.pairwise(marks)), default=0.0)


async def slowest_processing(dsn: str, since: float, until: float) -> float | None:
    """The longest a payment created between `since` and `until` (time.time()) waited
    from creation to its final status, once none of them is pending; None when some
    are still pending after RTO_LIMIT_S."""
    deadline = time.monotonic() + RTO_LIMIT_S
    while time.monotonic() < deadline:
        try:
            conn = await asyncpg.connect(dsn, timeout=10)
            try:
                row = await conn.fetchrow(
                    "SELECT count(*) FILTER (WHERE processed_at IS NULL) AS pending,"
                    " max(extract(epoch FROM processed_at - created_at))::float8 AS slowest"
                    " FROM payments WHERE created_at BETWEEN to_timestamp($1) AND to_timestamp($2)",
                    since,
                    until,
                )
            finally:
                await conn.close()
            if row is not None and row["pending"] == 0:
                return float(row["slowest"] or 0.0)
        except PG_ERRORS:
            pass
        await asyncio.sleep(1.0)
    return None


@dataclass
class HaFaults:
    """Runs fault kinds against `lab`; `ok_times` are the load's 2xx answers (monotonic)."""

    lab: Lab
    ok_times: list[float]
    cut_s: float = 30.0
    worker_cut_s: float = 15.0
    records: list[FaultRecord] = field(default_factory=list)

    async def run(self, kind: str) -> FaultRecord:
        """Execute one fault of `kind` and heal it; the record is also kept."""
        start_wall, start = time.time(), time.monotonic()
        host, rto, healed, error = "", None, None, ""
        try:
            host, rto = await getattr(self, f"_{kind}")(start)
            healed = time.monotonic() - start
        except Exception as exc:  # reported in the verdict: a fault that did not run
            error = f"{type(exc).__name__}: {exc}"[:300]
        record = FaultRecord(kind, host, start_wall, rto, healed, error)
        self.records.append(record)
        return record

    async def _pg(
        self, start: float, strike: Callable[[Host], object], heal: Callable[[Host], None]
    ) -> tuple[str, float | None]:
        """Strike the primary's host, time the first write after it while `heal` runs on
        its own timer, and wait until the struck node is the standby of the new primary."""
        formation = self.lab.formation
        assert formation is not None
        primary = await asyncio.to_thread(formation.primary)
        if primary is None:
            raise RuntimeError("no primary to strike")
        strike(primary)
        healing = asyncio.create_task(asyncio.to_thread(heal, primary))
        rto = await writable_after([formation.node_url(node) for node in formation.nodes], start)
        await healing
        keeper = formation.keeper(primary)
        if keeper is None or keeper.poll() is not None:
            await asyncio.to_thread(formation.restart, primary)

        def struck_is_standby() -> bool:
            reported = {name: state for name, (state, _goal) in formation.states().items()}
            return reported.get(primary.name) == "secondary" and "primary" in reported.values()

        await asyncio.to_thread(
            wait_for, struck_is_standby, f"{primary.name} as the new standby", HEAL_LIMIT_S
        )
        return primary.name, rto

    async def _pg_primary_kill9(self, start: float) -> tuple[str, float | None]:
        return await self._pg(start, kill9_host, lambda _host: None)

    async def _pg_primary_cut(self, start: float) -> tuple[str, float | None]:
        def heal(host: Host) -> None:
            time.sleep(max(0.0, self.cut_s - (time.monotonic() - start)))
            self.lab.net.heal(host)

        return await self._pg(start, self.lab.net.cut, heal)

    async def _mq(self, start: float, leader: bool) -> tuple[str, float | None]:
        """Kill a broker node (the leader of `payflow.payments`, or a node that leads no
        work queue) and time a confirmed publish to a probe queue that the victim leads
        (leader kind: a new leader must be elected) or a survivor leads (the other)."""
        rabbit = self.lab.rabbit
        assert rabbit is not None
        hosts = list(rabbit.hosts)
        lead = await asyncio.to_thread(rabbit.leader, WORK_QUEUE, hosts[0])
        if leader:
            if lead is None:
                raise RuntimeError(f"no leader of {WORK_QUEUE}")
            victim = lead
        else:
            victim = next(h for h in reversed(hosts) if h != lead)
        survivors = [h for h in hosts if h != victim]
        probe = f"{PROBE_QUEUE}.{len(self.records)}"
        await declare_probe(rabbit.url(victim if leader else survivors[0]), probe)
        start = time.monotonic()  # the declaration is set-up, not the fault
        kill9_host(victim)
        rto = await confirmed_after([rabbit.url(h) for h in survivors], probe, start)
        await asyncio.to_thread(rabbit.restart, victim)

        def whole() -> bool:
            try:
                return len(rabbit.running_nodes(survivors[0])) == len(hosts)
            except Exception:  # a node still booting answers rabbitmqctl with an error
                return False

        await asyncio.to_thread(wait_for, whole, "three RabbitMQ nodes", HEAL_LIMIT_S)
        return victim.name, rto

    async def _mq_node_kill9(self, start: float) -> tuple[str, float | None]:
        return await self._mq(start, leader=False)

    async def _mq_leader_kill9(self, start: float) -> tuple[str, float | None]:
        return await self._mq(start, leader=True)

    async def _api_host_kill9(self, start: float) -> tuple[str, float | None]:
        host = self.lab.host("api1")
        kill9_host(host)
        await asyncio.sleep(5.0)
        gap = longest_gap(self.ok_times, start, time.monotonic())
        await asyncio.to_thread(self.lab.start_role, "api1")
        await asyncio.to_thread(wait_for, port_check(host.address, API_PORT), "api1", 90.0)
        return host.name, gap

    async def _worker_host_cut(self, start: float) -> tuple[str, float | None]:
        """Cut a worker host; the figure is the longest a payment created from 5 s before
        the cut to its end waited to be final (the cut worker's charges wait for their
        lease, then the sweep or the other worker finishes them)."""
        host = self.lab.host("wk1")
        cut_at = time.time()
        self.lab.net.cut(host)
        await asyncio.sleep(self.worker_cut_s)
        self.lab.net.heal(host)
        assert self.lab.formation is not None
        slowest = await slowest_processing(
            self.lab.formation.dsn(user="payflow_app"), cut_at - 5.0, time.time()
        )
        return host.name, slowest
