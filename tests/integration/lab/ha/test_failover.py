"""Losing a machine loses no money: payflow over hosts made of network namespaces
(lab/payflow_lab/ha), with PostgreSQL under pg_auto_failover and a three-node RabbitMQ
cluster. Payments go through HAProxy to two APIs; the primary's postgres and pg_autoctl
are killed with SIGKILL; payments keep coming. Then: every payment answered 202 exists
once (RPO 0, none duplicated), the API answered 503 and never 500 during the gap, every
payment is processed by the workers on the new primary, and the RTO is printed. Then one
RabbitMQ node is killed: confirmed messages on a quorum queue survive, and payments keep
being delivered and processed. `payflow status --cluster` is checked before and after.

First, the short form of `payflow chaos --ha`: a few hundred requests of the chaos load
(payments, deposits on a private anvil, withdrawals) through HAProxy while each fault
kind runs once (the primary killed -9, the primary's host cut, a broker node and the
payments queue's leader killed -9, an API host lost, a worker host cut mid-gateway-call);
the chaos verdict with no dead letter forgiven, RPO 0 and no 500. It brings up and tears
down its own lab, so it runs before the module's lab fixture exists.

Select with `-m ha`; skips with one line where namespaces cannot be made or the packages
are missing (`make ha-lab`).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import aio_pika
import asyncpg
import httpx
import pytest
from rich.console import Console

from payflow_lab.anvil import AnvilNotInstalled
from payflow_lab.ha.faults import KINDS
from payflow_lab.ha.procs import kill9_host
from payflow_lab.ha.run import HaChaosConfig, HaUnavailable, run_ha_chaos
from payflow_lab.ha.topology import API_KEY, Lab, LabBusy, unavailable_reason

pytestmark = [pytest.mark.ha, pytest.mark.slow]
BATCH = 30


async def test_short_ha_chaos_run_loses_nothing_and_recovers_from_every_fault(
    tmp_path: Path,
) -> None:
    config = HaChaosConfig(events=500, seed=7, rate=5.0, cycles=1, settle_s=3.0)
    report = tmp_path / "report.txt"
    try:
        with report.open("w") as out:
            result = await run_ha_chaos(config, Console(file=out, soft_wrap=True, width=200))
    except (HaUnavailable, AnvilNotInstalled) as exc:
        pytest.skip(f"HA lab: {exc}")
    text = report.read_text()
    print(text)
    assert {r.kind for r in result.faults} == set(KINDS), text  # a cycle at least
    for record in result.faults:
        assert not record.error and record.rto_s is not None and record.healed_s is not None, record
    fields = result.fields
    assert (fields["lost"], fields["duplicated"], fields["rpo_missing"]) == (0, 0, 0), text
    assert (fields["http_500"], fields["dead_letters"], fields["recon"]) == (0, 0, "clean"), text
    assert result.verdict.exactly_once, text
    assert result.ok and fields["exactly_once"] == "yes", text


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    # Asked here, not at import: every pytest worker collects the same tests, and the
    # skip is one line for the module (the fixture is module-scoped).
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"HA lab: {reason}")
    lab = Lab(keep=bool(os.environ.get("HA_LAB_KEEP")))  # keep: its logs stay
    try:
        lab.__enter__()
    except LabBusy as exc:
        pytest.skip(f"HA lab: {exc}")
    try:
        print("ha lab up:", " ".join(f"{k}={v:.1f}" for k, v in lab.timings.items()))
        yield lab
    finally:
        lab.close()


def _cluster_status(lab: Lab) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "payflow", "status", "--cluster", "--json"],
        env=lab.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, json.loads(done.stdout)


def _roles(status: dict[str, object]) -> dict[str, str]:
    return {f"{n['host']}": n["role"] for n in status["databases"]}  # type: ignore[attr-defined]


class Client:
    """Creates payments through HAProxy, retrying a 503 with the same Idempotency-Key."""

    def __init__(self, lab: Lab) -> None:
        self.http = httpx.Client(base_url=lab.api_url, headers={"X-API-Key": API_KEY}, timeout=10.0)
        self.accepted: dict[str, str] = {}  # idempotency key -> payment id
        self.statuses: list[tuple[float, int]] = []

    def create(self, tag: str, deadline_s: float = 120.0) -> float:
        """One payment, retried until answered 202; the time of the 202."""
        key = f"{tag}-{uuid.uuid4().hex[:12]}"
        body = {"amount": "1.00", "currency": "USD", "description": f"ha {key}", "metadata": {}}
        limit = time.monotonic() + deadline_s
        while True:
            try:
                response = self.http.post(
                    "/api/v1/payments", json=body, headers={"Idempotency-Key": key}
                )
                status = response.status_code
            except httpx.TransportError:
                status = 0  # no answer at all (counted, never a 500)
            self.statuses.append((time.monotonic(), status))
            if status == 202:
                self.accepted[key] = response.json()["payment_id"]
                return time.monotonic()
            assert status in (0, 502, 503, 504), (status, response.text[:300])
            if status == 503:
                assert response.headers["content-type"].startswith("application/problem+json")
                assert "retry-after" in response.headers
            assert time.monotonic() < limit, f"no 202 for {key} within {deadline_s:.0f}s"
            time.sleep(0.2)

    def processed(self, payment_id: str) -> bool:
        response = self.http.get(f"/api/v1/payments/{payment_id}")
        return response.status_code == 200 and response.json()["status"] in ("succeeded", "failed")


def _wait_processed(client: Client, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    waiting = set(client.accepted.values())
    while waiting:
        waiting = {pid for pid in waiting if not client.processed(pid)}
        assert time.monotonic() < deadline, f"{len(waiting)} payments not processed"
        time.sleep(0.5)


async def _stored(lab: Lab) -> dict[str, int]:
    assert lab.formation is not None
    conn = await asyncpg.connect(lab.formation.dsn(), timeout=10)
    try:
        rows = await conn.fetch(
            "SELECT id::text AS id, count(*) OVER (PARTITION BY description) AS copies"
            " FROM payments WHERE description LIKE 'ha %'"
        )
        dead = await conn.fetchval("SELECT count(*) FROM dead_letter_queue")
    finally:
        await conn.close()
    print(f"dead letters recorded: {dead}")
    return {row["id"]: row["copies"] for row in rows}


@pytest.fixture
def client(lab: Lab) -> Iterator[Client]:
    made = Client(lab)
    yield made
    made.http.close()


def test_primary_killed_loses_no_payment_and_the_api_never_answers_500(
    lab: Lab, client: Client
) -> None:
    code, before = _cluster_status(lab)
    assert code == 0, before["databases"]
    assert _roles(before) == {"10.77.0.11": "primary", "10.77.0.12": "standby"}
    assert [r["sync_state"] for r in before["replicas"]] in (["quorum"], ["sync"])  # type: ignore[index]
    for _ in range(BATCH):
        client.create("before")
    assert lab.formation is not None
    killed = kill9_host(lab.host("pg1"))  # its postgres and its pg_autoctl, by SIGKILL
    assert killed
    t_kill = time.monotonic()
    first_after = client.create("gap")
    for _ in range(BATCH - 1):
        client.create("after")
    rto = first_after - t_kill
    during = [status for t, status in client.statuses if t >= t_kill]
    print(
        f"failover: rto_s={rto:.1f} requests_in_gap={len(during) - BATCH}"
        f" answers={sorted(set(during))}"
    )
    assert 503 in during or 0 in during or rto < 1.0  # a gap shows as 503s (never 500)
    assert 500 not in [status for _t, status in client.statuses]

    stored = asyncio.run(_stored(lab))
    assert set(client.accepted.values()) <= set(stored)  # RPO 0: every 202 is on the new primary
    assert all(copies == 1 for copies in stored.values())  # none duplicated
    assert len(stored) == len(client.accepted)
    _wait_processed(client)  # the workers and relay found the new primary by themselves

    code, after = _cluster_status(lab)
    assert code == 1  # pg1 is down: the cluster is degraded
    assert _roles(after) == {"10.77.0.11": "down", "10.77.0.12": "primary"}


async def _publish_confirmed(url: str, queue: str, count: int) -> None:
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        await channel.declare_queue(queue, durable=True, arguments={"x-queue-type": "quorum"})
        for n in range(count):
            await channel.default_exchange.publish(
                aio_pika.Message(str(n).encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                routing_key=queue,
            )


async def _drain(url: str, queue: str) -> list[int]:
    connection = await aio_pika.connect(url)
    got: list[int] = []
    async with connection:
        channel = await connection.channel()
        declared = await channel.declare_queue(
            queue, durable=True, arguments={"x-queue-type": "quorum"}
        )
        while (message := await declared.get(no_ack=False, fail=False)) is not None:
            got.append(int(message.body))
            await message.ack()
    return got


def test_one_broker_node_killed_loses_no_confirmed_message(lab: Lab, client: Client) -> None:
    assert lab.rabbit is not None
    urls = lab.rabbit.urls()
    asyncio.run(_publish_confirmed(urls[1], "ha-probe", 200))
    killed = kill9_host(lab.host("mq1"))  # beam and epmd of the first node
    assert killed
    t_kill = time.monotonic()
    for _ in range(10):
        client.create("mq")
    _wait_processed(client)  # relay and workers moved to the surviving nodes
    print(f"broker node killed: payments processed after {time.monotonic() - t_kill:.1f}s")
    survived = asyncio.run(_drain(urls[2], "ha-probe"))
    assert sorted(survived) == list(range(200))
    code, status = _cluster_status(lab)
    assert code == 1
    assert [b["up"] for b in status["brokers"]] == [False, True, True]  # type: ignore[index]
