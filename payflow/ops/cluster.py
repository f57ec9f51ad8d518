"""`payflow status --cluster`: which PostgreSQL node is the primary, how far each standby
is behind it, and which broker nodes answer.

It needs no working primary (it is what an operator runs during a failover): each host
of DATABASE_URL (libpq's multi-host form, `postgresql://u@h1:5432,h2:5432/db`) is asked
on its own, with the migration login (`MIGRATION_DATABASE_URL`; the lag columns of
`pg_stat_replication` need `pg_read_all_stats`), whether it is in recovery; the primary
is asked for `pg_stat_replication` (write/flush/replay lag and `sync_state`). Each URL of
RABBITMQ_URLS (or RABBITMQ_URL) gets one short AMQP connection.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass, field
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from rich.console import Console
from rich.table import Table

from payflow.broker import short_connection
from payflow.config import Settings
from payflow.config.base import url_hosts

REPLICATION_SQL = """
SELECT application_name AS name, client_addr::text AS client, state, sync_state,
       extract(epoch FROM write_lag)::float8 AS write_lag_s,
       extract(epoch FROM flush_lag)::float8 AS flush_lag_s,
       extract(epoch FROM replay_lag)::float8 AS replay_lag_s
FROM pg_stat_replication ORDER BY application_name
"""


@dataclass(frozen=True, slots=True)
class DatabaseNode:
    """One PostgreSQL host: `primary`, `standby` or `down` (with why)."""

    host: str
    port: int
    role: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Replica:
    """One row of the primary's `pg_stat_replication` (lags in seconds, None when idle)."""

    name: str
    client: str | None
    state: str
    sync_state: str
    write_lag_s: float | None
    flush_lag_s: float | None
    replay_lag_s: float | None


@dataclass(frozen=True, slots=True)
class BrokerNode:
    """One broker URL (password masked): up or not, and why not."""

    url: str
    up: bool
    detail: str = ""


@dataclass
class ClusterStatus:
    """What `payflow status --cluster` shows; `problems` is empty when all is well."""

    databases: list[DatabaseNode]
    replicas: list[Replica]
    brokers: list[BrokerNode]
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


def host_urls(url: str) -> list[tuple[str, int, str]]:
    """`(host, port, url)` for each host of `url`: the same login and database on that
    host alone, without `target_session_attrs` (any session is wanted)."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    query = "&".join(q for q in parts.query.split("&") if q and "target_session_attrs" not in q)
    out = []
    for host, port_text in url_hosts(url):
        port = int(port_text) if port_text else 5432
        shown = f"[{host}]" if ":" in host else host
        netloc = (f"{userinfo}@" if userinfo else "") + f"{shown}:{port}"
        out.append((host, port, urlunsplit((parts.scheme, netloc, parts.path, query, ""))))
    return out


async def _database_node(
    host: str, port: int, url: str, timeout_s: float
) -> tuple[DatabaseNode, list[Replica]]:
    try:
        conn = await asyncpg.connect(url, timeout=timeout_s)
    except Exception as exc:  # any failure to connect is "down", named
        return DatabaseNode(host, port, "down", f"{type(exc).__name__}: {exc}"[:200]), []
    try:
        in_recovery = await conn.fetchval("SELECT pg_is_in_recovery()", timeout=timeout_s)
        if in_recovery:
            return DatabaseNode(host, port, "standby"), []
        rows = await conn.fetch(REPLICATION_SQL, timeout=timeout_s)
        replicas = [Replica(**dict(r)) for r in rows]
        return DatabaseNode(host, port, "primary"), replicas
    except Exception as exc:  # a node that answers but fails the probe is not usable
        return DatabaseNode(host, port, "down", f"{type(exc).__name__}: {exc}"[:200]), []
    finally:
        conn.terminate()


def _masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":******@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


async def _broker_node(url: str, timeout_s: float) -> BrokerNode:
    try:
        async with short_connection(url, timeout_s):
            return BrokerNode(_masked(url), True)
    except Exception as exc:  # any failure to connect is "down", named
        return BrokerNode(_masked(url), False, f"{type(exc).__name__}: {exc}"[:200])


async def collect_cluster(settings: Settings) -> ClusterStatus:
    """Ask every database host and broker node at once (each within
    STATUS_BROKER_TIMEOUT_S) and judge the answers."""
    timeout_s = settings.status_broker_timeout_s
    hosts = host_urls(settings.database.migration_url())
    db_answers = await asyncio.gather(*(_database_node(*h, timeout_s) for h in hosts))
    brokers = await asyncio.gather(*(_broker_node(u, timeout_s) for u in settings.broker_urls()))
    databases = [node for node, _ in db_answers]
    replicas = [replica for _, rows in db_answers for replica in rows]
    status = ClusterStatus(databases, replicas, list(brokers))
    primaries = [n for n in databases if n.role == "primary"]
    if not primaries:
        status.problems.append("no PostgreSQL primary reachable")
    elif len(primaries) > 1:
        names = ", ".join(f"{n.host}:{n.port}" for n in primaries)
        status.problems.append(f"several primaries: {names}")
    status.problems.extend(
        f"database node down: {n.host}:{n.port}" for n in databases if n.role == "down"
    )
    if (
        len(databases) > 1
        and primaries
        and not any(r.sync_state in ("sync", "quorum") for r in replicas)
    ):
        status.problems.append(
            "no synchronous standby: commits are not replicated before they return"
        )
    status.problems.extend(f"broker node down: {b.url}" for b in brokers if not b.up)
    return status


def _lag(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def render_cluster(status: ClusterStatus, console: Console) -> None:
    """Three tables (database nodes, replication, brokers) and the verdict."""
    nodes = Table(title="PostgreSQL nodes")
    for column in ("host", "role", "detail"):
        nodes.add_column(column)
    colours = {"primary": "green", "standby": "cyan", "down": "red"}
    for n in status.databases:
        nodes.add_row(f"{n.host}:{n.port}", f"[{colours[n.role]}]{n.role}[/]", n.detail)
    console.print(nodes)
    replication = Table(title="replication (on the primary)")
    for column in ("standby", "client", "state", "sync", "write lag", "flush lag", "replay lag"):
        replication.add_column(column)
    for r in status.replicas:
        replication.add_row(
            r.name, r.client or "-", r.state, r.sync_state,
            _lag(r.write_lag_s), _lag(r.flush_lag_s), _lag(r.replay_lag_s),
        )  # fmt: skip
    console.print(replication)
    brokers = Table(title="RabbitMQ nodes")
    for column in ("url", "state", "detail"):
        brokers.add_column(column)
    for b in status.brokers:
        brokers.add_row(b.url, "[green]up[/]" if b.up else "[red]down[/]", b.detail)
    console.print(brokers)
    console.print("OK" if status.ok else "WRONG: " + "; ".join(status.problems))


async def print_cluster(settings: Settings, *, as_json: bool) -> bool:
    """Collect and print the cluster's state; True when all is well."""
    status = await collect_cluster(settings)
    if as_json:
        body = asdict(status)
        body["ok"] = status.ok
        print(json.dumps(body, sort_keys=True))
    else:
        render_cluster(status, Console(soft_wrap=True))
    return status.ok
