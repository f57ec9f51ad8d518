"""`payflow bench ledger`: the real posting path against a plain-SQL ceiling, side by side.

Both runs use one process, the same event loop, the same concurrency and tables that
are already filled and VACUUM ANALYZEd. The ceiling does the double-entry posting's writes
with no payflow logic, as one statement per event on shadow copies of the real tables
(their columns, indexes, checks and foreign keys; no triggers):
claim insert, event status update, guarded balance update, the customer leg with its
balance_after and the counterparty leg.

Modes: `spread` posts over 10,000 accounts, its deposits credited from several chains (so
several custody accounts, plus custody:external and fees); `system` posts over the same
accounts but every posting's counterparty is one system account (custody:external:ETH);
`hot` posts on one customer account. `hot` and `system` also post a `spread` workload in
the same rounds, so their ratio to spread is measured side by side.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import random
import time
import uuid
from array import array
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TypeVar

import asyncpg
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from payflow.config import Settings
from payflow.db.pool import create_pool
from payflow.ledger.posting import post_event
from payflow.ledger.recon import reconcile
from payflow.ledger.records import EventType, Outcome
from payflow.ledger.together import PostingCoalescer
from payflow.money import from_base_units
from payflow.retry import RetryPolicy, RetryStats
from payflow_lab.bench.common import (
    bench_database,
    peak_rss_mb,
    percentile,
    result_line,
    setup_url,
)

SPREAD_ACCOUNTS = 10_000
HISTORY_PER_ACCOUNT = 5
OPENING_BALANCE = Decimal(100)
WARMUP_EVENTS = 500
ROUNDS = 4
MODES = ("spread", "hot", "system")
# Chains spread's deposits and airdrops come from: each has its own custody account.
SPREAD_CHAINS = ("ETH_MAINNET", "ARBITRUM", "OPTIMISM", "BASE")
EXTERNAL_CUSTODY = "custody:external:ETH"

Job = TypeVar("Job")


@dataclass(frozen=True, slots=True)
class LedgerBenchConfig:
    events: int
    concurrency: int
    mode: str  # one of MODES
    dup: int
    seed: int


@dataclass(frozen=True, slots=True)
class RunFigures:
    events_per_s: float
    p50_ms: float
    p99_ms: float
    seconds: float


async def run_ledger_bench(settings: Settings, config: LedgerBenchConfig) -> bool:
    """Run the benchmark in a throwaway database; True when exactly-once was verified."""
    console = Console(soft_wrap=True)
    async with bench_database(settings) as url:
        bench_settings = settings.model_copy(update={"database_url": url})
        # Like the workers' pools: no session state is ever set, so skip the reset round trip.
        pool = await create_pool(
            bench_settings,
            min_size=config.concurrency,
            max_size=config.concurrency + 2,
            reset_session=False,
        )
        try:
            return await _bench(pool, bench_settings, config, console)
        finally:
            await pool.close()


async def _bench(
    pool: asyncpg.Pool, settings: Settings, config: LedgerBenchConfig, console: Console
) -> bool:
    rng = random.Random(config.seed)
    console.print(
        f"filling: {SPREAD_ACCOUNTS} accounts with {HISTORY_PER_ACCOUNT} ledger rows each"
    )
    # The pre-fill writes the journal and balances directly: the migration login's job
    # (the service's role moves money only through the posting functions, migration 0032).
    setup = await asyncpg.connect(setup_url(settings, settings.database_url))
    try:
        accounts = await _fill(setup)
    finally:
        await setup.close()
    targets = accounts if config.mode != "hot" else accounts[:1]
    workload = _workload(rng, targets, config, prefix="ev")
    ceiling_workload = _workload(rng, targets, config, prefix="cl")
    warmup = _workload(rng, targets, LedgerBenchConfig(WARMUP_EVENTS, 1, config.mode, 1, 0), "wu")
    # hot and system also post a spread workload in the same rounds (the side-by-side ratio).
    spread_config = dataclasses.replace(config, mode="spread")
    spread_workload = (
        _workload(rng, accounts, spread_config, prefix="sp") if config.mode != "spread" else []
    )
    # Chains, shadow tables and VACUUM need the owner; the owner's default privileges give
    # the service's role the same DML on the shadows as on the real tables.
    owner = await asyncpg.connect(setup_url(settings, settings.database_url))
    try:
        await owner.execute(f'SET ROLE "{settings.db_owner_role}"')
        await owner.executemany(
            "INSERT INTO chains (chain, native_asset, native_decimals) VALUES ($1, 'ETH', 18)"
            " ON CONFLICT (chain) DO NOTHING",
            [(chain,) for chain in SPREAD_CHAINS],
        )
        await _insert_events(pool, warmup + workload + spread_workload)
        await _make_shadow_tables(owner, ceiling_workload)
        await owner.execute("VACUUM ANALYZE")
    finally:
        await owner.close()

    stats = RetryStats()
    outcomes: dict[str, Outcome] = {}
    policy = RetryPolicy(max_attempts=50, max_total_s=120.0)

    # The ledger worker's own coalescer: concurrent postings share a statement and a commit.
    together = PostingCoalescer(pool, settings.database)

    async def post(event_id: str) -> None:
        result = await post_event(
            pool, settings.database, event_id, policy=policy, stats=stats, together=together
        )
        if not result.replayed:
            if event_id in outcomes:
                raise AssertionError(f"{event_id} applied twice")
            outcomes[event_id] = result.outcome

    async def ceiling(job: _Event) -> None:
        # The double-entry posting's writes as one statement: claim, event status, guarded
        # balance, customer leg with balance_after, counterparty leg. The delta is always a
        # credit, so every ceiling event does all the writes.
        async with pool.acquire() as conn:
            await conn.execute(CEILING_POSTING, job.event_id, CEILING_DELTA, job.counterparty)

    def deliveries_of(events: list[_Event]) -> list[str]:
        ids = [e.event_id for e in events for _ in range(config.dup)]
        rng.shuffle(ids)
        return ids

    deliveries = deliveries_of(workload)
    spread_deliveries = deliveries_of(spread_workload)
    await _drive([e.event_id for e in warmup], post, config.concurrency, None, None)
    outcomes.clear()
    stats.retries = 0

    ceiling_run, payflow_run, spread_run = _Run(), _Run(), _Run()
    with _progress(console) as progress:
        ceiling_task = progress.add_task(
            "ceiling (plain SQL, one statement)", total=len(ceiling_workload)
        )
        payflow_task = progress.add_task(
            f"payflow post_event ({config.mode})", total=len(deliveries)
        )
        spread_task = progress.add_task(
            "payflow post_event (spread, side by side)", total=len(spread_deliveries)
        )
        # Alternate in rounds so that background load on a shared machine hits all alike.
        for round_index in range(ROUNDS):
            await _drive(
                ceiling_workload[round_index::ROUNDS],
                ceiling,
                config.concurrency,
                ceiling_run,
                lambda: progress.advance(ceiling_task),
            )
            await _drive(
                deliveries[round_index::ROUNDS],
                post,
                config.concurrency,
                payflow_run,
                lambda: progress.advance(payflow_task),
            )
            if spread_deliveries:
                await _drive(
                    spread_deliveries[round_index::ROUNDS],
                    post,
                    config.concurrency,
                    spread_run,
                    lambda: progress.advance(spread_task),
                )
    ceiling_figures = ceiling_run.figures()
    figures = payflow_run.figures()
    spread_figures = spread_run.figures() if spread_deliveries else None

    exactly_once, recon_clean = await _verify(pool, settings, workload + spread_workload, outcomes)
    async with pool.acquire() as conn:
        # The system accounts the measured postings' counterparty legs landed on.
        counterparties = await conn.fetchval(
            "SELECT count(DISTINCT ledger_account) FROM ledger_legs"
            " WHERE source_event_id = ANY($1::text[])",
            [e.event_id for e in workload],
        )
    mode_ids = {e.event_id for e in workload}
    refused = sum(
        1 for k, o in outcomes.items() if o is Outcome.INSUFFICIENT_FUNDS and k in mode_ids
    )
    events_per_s = config.events / figures.seconds
    ratio = events_per_s / ceiling_figures.events_per_s
    comparison: dict[str, object] = {}
    if spread_figures is not None:
        spread_events_per_s = config.events / spread_figures.seconds
        vs_spread = events_per_s / spread_events_per_s
        target = 0.5 if config.mode == "hot" else 0.8
        comparison = {
            "spread_events_per_s": f"{spread_events_per_s:.0f}",
            "vs_spread": f"{vs_spread:.2f}",
            "vs_spread_target": f"{target}",
        }
    rss = peak_rss_mb()
    console.print(
        f"payflow: {figures.events_per_s:,.0f} deliveries/s over {figures.seconds:.1f}s, "
        f"p50 {figures.p50_ms:.2f} ms, p99 {figures.p99_ms:.2f} ms, retries {stats.retries}, "
        f"insufficient_funds {refused}"
    )
    if spread_figures is not None:
        console.print(
            f"payflow spread (same rounds): {config.events / spread_figures.seconds:,.0f}"
            f" events/s, p99 {spread_figures.p99_ms:.2f} ms; {config.mode}/spread"
            f" {comparison['vs_spread']} (target >= {comparison['vs_spread_target']})"
        )
    console.print(
        f"ceiling (one statement, double-entry writes): {ceiling_figures.events_per_s:,.0f}"
        f" tx/s, p50 {ceiling_figures.p50_ms:.2f} ms, p99 {ceiling_figures.p99_ms:.2f} ms;"
        f" payflow/ceiling {ratio:.2f}"
    )
    console.print(f"counterparty system accounts of the {config.mode} postings: {counterparties}")
    console.print(
        f"exactly-once verified: {'yes' if exactly_once else 'no'}; "
        f"reconciliation: {'clean' if recon_clean else 'DIRTY'}"
    )
    console.print(
        result_line(
            mode=config.mode,
            events=config.events,
            dup=config.dup,
            concurrency=config.concurrency,
            events_per_s=f"{events_per_s:.0f}",
            deliveries_per_s=f"{figures.events_per_s:.0f}",
            p50_ms=f"{figures.p50_ms:.2f}",
            p99_ms=f"{figures.p99_ms:.2f}",
            retries=stats.retries,
            insufficient_funds=refused,
            ceiling_tps=f"{ceiling_figures.events_per_s:.0f}",
            ratio=f"{ratio:.2f}",
            counterparties=counterparties,
            **comparison,
            exactly_once="yes" if exactly_once and recon_clean else "no",
            rss_mb=f"{rss:.0f}",
        )
    )
    return exactly_once and recon_clean


@dataclass(frozen=True, slots=True)
class _Event:
    event_id: str
    account: uuid.UUID
    amount: Decimal
    event_type: EventType
    counterparty: str  # the system account on the other side (ceiling: written as given)
    chain: str | None = None  # a chain deposit: a chain_deposits row names the chain


CEILING_DELTA = Decimal("0.01")
CEILING_POSTING = """
WITH claim AS (
    INSERT INTO ceiling_processed (idempotency_key, event_id, outcome)
    VALUES ($1, $1, 'success')
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING event_id
), event AS (
    UPDATE ceiling_events e SET status = 'confirmed', updated_at = now()
    FROM claim c
    WHERE e.event_id = c.event_id AND e.status IN ('enqueued', 'processing')
    RETURNING e.account_id, e.event_type
), balance AS (
    UPDATE ceiling_accounts a SET balance = a.balance + $2, updated_at = now()
    FROM event e
    WHERE a.id = e.account_id AND a.balance + $2 >= a.held AND a.status = 'active'
    RETURNING a.id, a.balance, e.event_type
), customer AS (
    INSERT INTO ceiling_ledger (account_id, amount, event_type, source_event_id,
                                balance_after)
    SELECT id, $2, event_type, $1, balance FROM balance
)
INSERT INTO ceiling_legs (source_event_id, ledger_account, amount, kind)
SELECT $1, $3, -$2::numeric, event_type FROM balance
"""


def _workload(
    rng: random.Random, accounts: list[uuid.UUID], config: LedgerBenchConfig, prefix: str
) -> list[_Event]:
    """hot: deposits and withdrawals; spread: deposits and airdrops from SPREAD_CHAINS,
    withdrawals (custody:external) and withdrawal fees (fees:ETH); system: the same shape
    with every counterparty custody:external:ETH (the fees become withdrawals)."""
    if config.mode == "hot":
        types, weights = [EventType.DEPOSIT, EventType.WITHDRAWAL], [1, 1]
    elif config.mode == "system":
        types, weights = [EventType.DEPOSIT, EventType.AIRDROP, EventType.WITHDRAWAL], [6, 1, 3]
    else:
        types = [
            EventType.DEPOSIT,
            EventType.AIRDROP,
            EventType.WITHDRAWAL,
            EventType.WITHDRAWAL_FEE,
        ]
        weights = [6, 1, 2, 1]
    run = uuid.uuid4().hex[:6]
    events = []
    for index in range(config.events):
        account = rng.choice(accounts)
        amount = from_base_units(rng.randint(1, 200), 2)
        event_type = rng.choices(types, weights)[0]
        event_id, chain, counterparty = f"{prefix}-{run}-{index}", None, EXTERNAL_CUSTODY
        if event_type is EventType.WITHDRAWAL_FEE:
            counterparty = "fees:ETH"
        elif config.mode == "spread" and event_type in (EventType.DEPOSIT, EventType.AIRDROP):
            chain = SPREAD_CHAINS[index % len(SPREAD_CHAINS)]
            tx_hash = "0x" + hashlib.sha256(event_id.encode()).hexdigest()
            event_id, counterparty = f"chain:{chain}:{tx_hash}:0", f"custody:{chain}:ETH"
        events.append(_Event(event_id, account, amount, event_type, counterparty, chain))
    return events


async def _fill(conn: asyncpg.Connection) -> list[uuid.UUID]:
    """Accounts with history, so plans and indexes look like production, not empty tables."""
    async with conn.transaction():
        ids: list[uuid.UUID] = [
            r["id"]
            for r in await conn.fetch(
                "INSERT INTO accounts (asset, balance, initial_balance)"
                " SELECT 'ETH', $1::numeric + $2, $1 FROM generate_series(1, $3)"
                " RETURNING id",
                OPENING_BALANCE,
                HISTORY_PER_ACCOUNT,
                SPREAD_ACCOUNTS,
            )
        ]
        # Double-entry books: each opening is a transfer opening:ETH -> account.
        await conn.execute(
            """
            WITH t AS (
                INSERT INTO ledger_transfers (kind, reference)
                SELECT 'opening', id::text FROM unnest($1::uuid[]) AS a(id)
                RETURNING id, reference
            )
            INSERT INTO ledger_legs (transfer_id, account_id, ledger_account, amount, kind)
            SELECT t.id, leg.account_id, leg.code, leg.amount, 'opening'
            FROM t CROSS JOIN LATERAL (VALUES
                (t.reference::uuid, NULL::text, $2::numeric),
                (NULL::uuid, ledger_account('opening', NULL, 'ETH'), -$2::numeric)
            ) AS leg(account_id, code, amount)
            """,
            ids,
            OPENING_BALANCE,
        )
        await conn.execute(
            """
            WITH history AS (
                SELECT a.id AS account_id, n, 'hist-' || a.id || '-' || n AS event_id
                FROM unnest($1::uuid[]) AS a(id), generate_series(1, $2) AS n
            ), events AS (
                INSERT INTO payment_events (event_id, account_id, amount, event_type, status)
                SELECT event_id, account_id, 1, 'deposit', 'confirmed' FROM history
            ), processed AS (
                INSERT INTO processed_events (idempotency_key, event_id, outcome)
                SELECT 'hist:' || event_id, event_id, 'success' FROM history
            ), counterparty AS (
                INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind)
                SELECT event_id, ledger_account('custody', 'external', 'ETH'), -1, 'deposit'
                FROM history
            )
            INSERT INTO balance_events (account_id, amount, event_type, source_event_id,
                                        balance_after)
            SELECT account_id, 1, 'deposit', event_id, $3::numeric + n FROM history
            """,
            ids,
            HISTORY_PER_ACCOUNT,
            OPENING_BALANCE,
        )
    return ids


async def _insert_events(pool: asyncpg.Pool, events: list[_Event]) -> None:
    """Store the workload as enqueued events, as the relay leaves them for the workers."""
    async with pool.acquire() as conn:
        await conn.copy_records_to_table(
            "payment_events",
            records=[
                (e.event_id, e.account, e.amount, e.event_type.value, "enqueued") for e in events
            ],
            columns=["event_id", "account_id", "amount", "event_type", "status"],
        )
        # A chain deposit's event names its chain_deposits row, where the posting finds the
        # chain of its custody account (as the scanner leaves it: credited by this event).
        await conn.copy_records_to_table(
            "chain_deposits",
            records=[
                (
                    e.event_id.removeprefix("chain:"),
                    e.chain,
                    e.event_id.split(":")[2],
                    0,
                    "0x" + "11" * 20,
                    int(e.amount * 100),
                    e.account,
                    "ETH",
                    e.amount,
                    "credited",
                    1,
                    "0x" + "22" * 32,
                    ["bench"],
                    e.event_id,
                )
                for e in events
                if e.chain is not None
            ],
            columns=[
                "transfer_id",
                "chain",
                "tx_hash",
                "position",
                "to_address",
                "units",
                "account_id",
                "asset",
                "amount",
                "status",
                "block_number",
                "block_hash",
                "sources",
                "credit_event_id",
            ],
        )


async def _make_shadow_tables(conn: asyncpg.Connection, ceiling_workload: list[_Event]) -> None:
    async with conn.transaction():
        for shadow, real in (
            ("ceiling_accounts", "accounts"),
            ("ceiling_processed", "processed_events"),
            ("ceiling_events", "payment_events"),
            ("ceiling_ledger", "balance_events"),
            ("ceiling_legs", "ledger_legs"),
        ):
            await conn.execute(f"CREATE TABLE {shadow} (LIKE {real} INCLUDING ALL)")
        await conn.execute("INSERT INTO ceiling_accounts SELECT * FROM accounts")
        await conn.execute("INSERT INTO ceiling_processed SELECT * FROM processed_events")
        await conn.execute("INSERT INTO ceiling_events SELECT * FROM payment_events")
        await conn.execute(
            "INSERT INTO ceiling_ledger (account_id, amount, event_type, source_event_id,"
            " balance_after, created_at) SELECT account_id, amount, event_type, source_event_id,"
            " balance_after, created_at FROM balance_events"
        )
        await conn.execute(
            "INSERT INTO ceiling_legs (source_event_id, transfer_id, account_id, ledger_account,"
            " amount, kind, created_at) SELECT source_event_id, transfer_id, account_id,"
            " ledger_account, amount, kind, created_at FROM ledger_legs"
        )
        # LIKE copies no foreign keys: the shadows get the real tables' own, so the ceiling
        # writes under the same referential checks as the posting does.
        for shadow, column, parent, key in (
            ("ceiling_ledger", "account_id", "ceiling_accounts", "id"),
            ("ceiling_ledger", "source_event_id", "ceiling_events", "event_id"),
            ("ceiling_legs", "source_event_id", "ceiling_events", "event_id"),
        ):
            await conn.execute(
                f"ALTER TABLE {shadow} ADD FOREIGN KEY ({column}) REFERENCES {parent} ({key})"
            )
        await conn.copy_records_to_table(
            "ceiling_events",
            records=[
                (e.event_id, e.account, e.amount, e.event_type.value, "enqueued")
                for e in ceiling_workload
            ],
            columns=["event_id", "account_id", "amount", "event_type", "status"],
        )


@dataclass(slots=True)
class _Run:
    """Time and per-job latencies accumulated over the rounds of one side."""

    jobs: int = 0
    seconds: float = 0.0
    latencies: array[float] = field(default_factory=lambda: array("d"))

    def figures(self) -> RunFigures:
        ordered = sorted(self.latencies)
        return RunFigures(
            events_per_s=self.jobs / self.seconds if self.seconds else 0.0,
            p50_ms=percentile(ordered, 0.50) * 1000,
            p99_ms=percentile(ordered, 0.99) * 1000,
            seconds=self.seconds,
        )


async def _drive(
    jobs: list[Job],
    run_one: Callable[[Job], Awaitable[None]],
    concurrency: int,
    run: _Run | None,
    on_done: Callable[[], None] | None,
) -> None:
    """Run `jobs` with `concurrency` workers; add time and latencies to `run`."""
    latencies = run.latencies if run is not None else array("d")
    queue = iter(jobs)

    async def worker() -> None:
        for job in queue:
            started = time.perf_counter()
            await run_one(job)
            latencies.append(time.perf_counter() - started)
            if on_done is not None:
                on_done()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    if run is not None:
        run.jobs += len(jobs)
        run.seconds += time.perf_counter() - started


async def _verify(
    pool: asyncpg.Pool, settings: Settings, workload: list[_Event], outcomes: dict[str, Outcome]
) -> tuple[bool, bool]:
    """Every event applied once: one outcome each, one ledger row per success, recon clean."""
    ids = [e.event_id for e in workload]
    successes = sum(1 for o in outcomes.values() if o is Outcome.SUCCESS)
    async with pool.acquire() as conn:
        processed = await conn.fetchval(
            "SELECT count(*) FROM processed_events WHERE event_id = ANY($1::text[])", ids
        )
        ledger_rows = await conn.fetchval(
            "SELECT count(*) FROM balance_events WHERE source_event_id = ANY($1::text[])", ids
        )
        open_events = await conn.fetchval(
            "SELECT count(*) FROM payment_events WHERE event_id = ANY($1::text[])"
            " AND status NOT IN ('confirmed', 'failed')",
            ids,
        )
    exactly_once = (
        len(outcomes) == len(workload)
        and processed == len(workload)
        and ledger_rows == successes
        and open_events == 0
    )
    report = await reconcile(pool, settings, full=True)
    return exactly_once, report.clean


def _progress(console: Console) -> Progress:
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
