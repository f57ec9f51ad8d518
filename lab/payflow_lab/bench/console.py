"""`payflow bench console`: the console's heaviest reads on filled tables, with and
without the indexes migration 0017 adds, and what those indexes cost an INSERT.

On a throwaway database (`bench_database`) filled with `payments` payments and as many
deposit events, spread over the last day across 20 merchants, then VACUUM ANALYZEd, it
times (as the service's role) the overview chart query (admin and one merchant), the
first page of payments (admin, merchant) and of events (admin), and a batch of payment
INSERTs; then it drops the four console indexes, ANALYZEs, and times the same again.
Figures are medians of `rounds` runs, in milliseconds; the ratios are without / with.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from rich.console import Console
from rich.table import Table

from payflow.config import Settings
from payflow.console import chart
from payflow.db.queries import load_queries
from payflow_lab.bench.common import bench_database, result_line, setup_url

SQL = load_queries("payflow.console")
CONSOLE_INDEXES = (
    "payments_created_idx",
    "payment_events_created_idx",
    "payments_processed_brin",
    "payment_events_updated_brin",
)
MERCHANTS = 20
out = Console()

FILL = [
    """
    INSERT INTO merchants (name, webhook_secret)
    SELECT 'bench-' || g, 'whsec_x' FROM generate_series(1, {merchants}) g
    """,
    """
    INSERT INTO api_keys (merchant_id, name, scope, key_hash)
    SELECT id, 'default', 'write', md5('bench-key-' || name) || md5('x' || name)
    FROM merchants WHERE name LIKE 'bench-%'
    """,
    """
    INSERT INTO accounts (asset, merchant_id)
    SELECT 'USDC', id FROM merchants WHERE name LIKE 'bench-%'
    """,
    """
    WITH m AS (SELECT array_agg(id ORDER BY id) AS ids FROM merchants WHERE name LIKE 'bench-%')
    INSERT INTO payments (merchant_id, amount, currency, status, idempotency_key,
                          created_at, processed_at)
    SELECT m.ids[1 + g % {merchants}], 10 + g % 1000, 'RUB',
           CASE WHEN g % 10 = 0 THEN 'pending' WHEN g % 10 = 1 THEN 'failed' ELSE 'succeeded' END,
           'bench-' || g,
           now() - make_interval(secs => (g * 86400.0 / {rows})),
           CASE WHEN g % 10 = 0 THEN NULL
                ELSE now() - make_interval(secs => (g * 86400.0 / {rows})) + interval '2 s' END
    FROM generate_series(1, {rows}) g, m
    """,
    """
    WITH a AS (SELECT array_agg(id ORDER BY id) AS ids FROM accounts
               WHERE merchant_id IN (SELECT id FROM merchants WHERE name LIKE 'bench-%'))
    INSERT INTO payment_events (event_id, account_id, amount, event_type, status,
                                created_at, updated_at)
    SELECT 'bench:' || g, a.ids[1 + g % {merchants}], 1 + g % 100, 'deposit',
           CASE WHEN g % 20 = 0 THEN 'failed' ELSE 'confirmed' END,
           now() - make_interval(secs => (g * 86400.0 / {rows})),
           now() - make_interval(secs => (g * 86400.0 / {rows})) + interval '3 s'
    FROM generate_series(1, {rows}) g, a
    """,
]


@dataclass(frozen=True, slots=True)
class ConsoleBenchConfig:
    """Rows per table, timed rounds per query, payments per INSERT batch."""

    payments: int = 200_000
    rounds: int = 30
    inserts: int = 5_000


async def _median_ms(rounds: int, call: Callable[[], Awaitable[Any]]) -> float:
    await call()  # warm the cache and the plan
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def _reads(pool: asyncpg.Pool, merchant: uuid.UUID, rounds: int) -> dict[str, float]:
    start = chart.window_start(datetime.now(UTC))

    def q(name: str, *args: object) -> Callable[[], Awaitable[Any]]:
        return lambda: pool.fetch(SQL[name], *args)

    return {
        "chart_admin": await _median_ms(rounds, q("activity_per_minute", None, start)),
        "chart_merchant": await _median_ms(rounds, q("activity_per_minute", merchant, start)),
        "payments_admin": await _median_ms(
            rounds, q("list_payments", None, None, None, None, None, None, 51)
        ),
        "payments_merchant": await _median_ms(
            rounds, q("list_payments", merchant, None, None, None, None, None, 51)
        ),
        "events_admin": await _median_ms(rounds, q("list_events", None, None, None, None, 51)),
    }


async def _insert_ms(pool: asyncpg.Pool, merchant: uuid.UUID, count: int, tag: str) -> float:
    rows = [(merchant, f"ins-{tag}-{i}") for i in range(count)]
    started = time.perf_counter()
    async with pool.acquire() as conn:
        await conn.executemany(
            "INSERT INTO payments (merchant_id, amount, currency, idempotency_key)"
            " VALUES ($1, 1, 'RUB', $2)",
            rows,
        )
    return (time.perf_counter() - started) * 1000


async def run_console_bench(settings: Settings, config: ConsoleBenchConfig) -> bool:
    """Fill, measure with the console indexes, drop them, measure again; print both."""
    async with bench_database(settings) as url:
        owner = await asyncpg.connect(setup_url(settings, url))
        pool = await asyncpg.create_pool(url, min_size=1, max_size=2)
        try:
            for statement in FILL:
                await owner.execute(statement.format(merchants=MERCHANTS, rows=config.payments))
            await owner.execute("VACUUM ANALYZE")
            merchant = await owner.fetchval("SELECT id FROM merchants WHERE name = 'bench-1'")
            with_idx = await _reads(pool, merchant, config.rounds)
            with_idx["insert"] = await _insert_ms(pool, merchant, config.inserts, "a")
            for index in CONSOLE_INDEXES:
                await owner.execute(f"DROP INDEX {index}")
            await owner.execute("VACUUM ANALYZE")
            without = await _reads(pool, merchant, config.rounds)
            without["insert"] = await _insert_ms(pool, merchant, config.inserts, "b")
        finally:
            await pool.close()
            await owner.close()
    table = Table(
        title=f"console reads, {config.payments} payments + {config.payments} deposit events, "
        f"median of {config.rounds} (ms); insert = {config.inserts} payments"
    )
    for column in ("query", "with 0017 indexes", "without", "without / with"):
        table.add_column(column)
    fields: dict[str, object] = {"bench": "console", "rows": config.payments}
    for name, value in with_idx.items():
        ratio = without[name] / value if value else 0.0
        table.add_row(name, f"{value:.2f}", f"{without[name]:.2f}", f"{ratio:.2f}")
        fields[f"{name}_ms"] = f"{value:.2f}"
        fields[f"{name}_noidx_ms"] = f"{without[name]:.2f}"
    out.print(table)
    print(result_line(**fields))
    return True
