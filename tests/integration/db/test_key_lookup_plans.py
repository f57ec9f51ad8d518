"""Every statement that looks a row up by its key finds it through the key's index, never by
walking a partial index and filtering it by the key.

A literal condition in a key lookup (`id = $1 AND status = 'pending'`) lets the planner
prove that a partial index whose predicate follows from it (`payments_pending_created_idx
... WHERE status = 'pending'`) can serve the statement. When that index's statistics were
taken on a quiet ledger it looks nearly empty, so the plan scans it whole (every row in
flight) with the key as a mere Filter, instead of the primary key: the cost of one lookup
then grows with the work in flight (about 600 rows read and thrown away per payment claim
under load). A parameter instead of the literal (`status = ANY($3)`) is as dangerous in a
custom plan, where the constant is substituted before the proof.

This builds the worst case on a migrated database: the history (terminal rows only, no
row matching any partial predicate) is VACUUM ANALYZEd, autovacuum is off, and then
thousands of rows in flight arrive that match every partial predicate. Each key lookup of
the service is planned with real parameters under both plan cache modes, and every scan
of its key's table must go through an index that leads with the key, with the key in its
Index Cond.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest

from payflow.db.queries import load_queries
from tests.conftest import RUN_ID, _admin_execute, _url, app_url, clone_database
from tests.integration.db.plans_world import HISTORY, IN_FLIGHT, KEYS, MATCHED_BY_HISTORY, TABLES


@dataclass(frozen=True)
class Lookup:
    """A key lookup: the named statement of `package`'s queries.sql, its parameters
    (`{key}` names a value of KEYS; None is NULL), and per table the indexes that lead
    with the statement's key (every scan of that table must use one of them)."""

    package: str
    name: str
    params: tuple[str | None, ...]
    through: dict[str, frozenset[str]] = field(default_factory=dict)
    case: str = ""  # tells two lookups of one statement apart

    @property
    def id(self) -> str:
        suffix = f"({self.case})" if self.case else ""
        return f"{self.package.removeprefix('payflow.')}:{self.name}{suffix}"


def _idx(*names: str) -> frozenset[str]:
    return frozenset(names)


PAYMENTS = {"payments": _idx("payments_pkey")}
EVENTS = {"payment_events": _idx("payment_events_pkey")}
DEPOSITS = {"chain_deposits": _idx("chain_deposits_pkey")}
REPORTS = {"chain_deposit_reports": _idx("chain_deposit_reports_pkey")}
PAYOUTS = {"payouts": _idx("payouts_pkey")}
ACCOUNTS = {"accounts": _idx("accounts_pkey")}
OUTBOX = {"outbox": _idx("outbox_pkey")}
ATTEMPTS = {"charge_attempts": _idx("charge_attempts_pkey")}

LOOKUPS: tuple[Lookup, ...] = (
    # ledger
    Lookup(
        "payflow.ledger",
        "transition_event",
        ("{pending_event}", "enqueued", "{{pending}}"),
        EVENTS,
        "pending",
    ),
    Lookup(
        "payflow.ledger",
        "transition_event",
        ("{enqueued_event}", "processing", "{{enqueued}}"),
        EVENTS,
        "enqueued",
    ),
    Lookup(
        "payflow.ledger",
        "transition_events",
        ("{pending_events}", "enqueued", "{{pending}}"),
        EVENTS,
    ),
    Lookup(
        "payflow.ledger",
        "post_success",
        (
            "ledger.post:x",
            "{pending_event}",
            "{{enqueued,pending,processing}}",
            "{{deposit}}",
            "{{withdrawal}}",
            "2000",
            "{unpublished_job}",
        ),
        OUTBOX,
    ),
    # outbox
    Lookup("payflow.outbox", "release_held_job", ("{unpublished_job}",), OUTBOX),
    # ops
    Lookup(
        "payflow.dlq",
        "resolve_dead_letter",
        ("{dead_letter}", "operator", "replayed"),
        {"dead_letter_queue": _idx("dead_letter_queue_pkey")},
    ),
    Lookup("payflow.payments", "count_payment_sweep", ("{pending_payment}",), PAYMENTS),
    Lookup("payflow.webhooks", "count_webhook_sweep", ("{undelivered_payment}",), PAYMENTS),
    Lookup("payflow.webhooks", "mark_webhook_dead", ("{undelivered_payment}",), PAYMENTS),
    # alerts: the open-incident index is keyed by the alert's key
    Lookup(
        "payflow.alerts",
        "resolve_alert",
        ("live-7",),
        {"alerts": _idx("alerts_one_open_per_key")},
    ),
    # chain deposits and their reports
    Lookup(
        "payflow.chain",
        "recheck_tx",
        ("PLANTEST", "{verified_tx}"),
        {
            "chain_deposits": _idx("chain_deposits_identity"),
            "chain_deposit_reports": _idx("chain_deposit_reports_once"),
        },
    ),
    Lookup("payflow.chain", "confirm_report", ("{pending_report}", "{verified_deposit}"), REPORTS),
    Lookup("payflow.chain", "refute_report", ("{pending_report}", "not on chain"), REPORTS),
    Lookup("payflow.chain", "reschedule_report", ("{pending_report}", "30"), REPORTS),
    Lookup(
        "payflow.chain", "reschedule_deposit", ("{verified_deposit}", "verified", "30"), DEPOSITS
    ),
    Lookup(
        "payflow.chain",
        "mark_credited",
        ("{verified_deposit}", "credit-x", "{verified_block}"),
        DEPOSITS,
    ),
    Lookup("payflow.chain", "mark_orphaned", ("{verified_deposit}", "30"), DEPOSITS),
    Lookup(
        "payflow.chain",
        "move_block",
        ("{verified_deposit}", "verified", "99", "0xmoved"),
        DEPOSITS,
        "verified",
    ),
    Lookup(
        "payflow.chain",
        "move_block",
        ("{credited_deposit}", "credited", "99", "0xmoved"),
        DEPOSITS,
        "credited",
    ),
    Lookup("payflow.chain", "mark_reversed", ("{credited_deposit}", "reversal-x", None), DEPOSITS),
    Lookup("payflow.chain", "deposit_for_reversal", ("{credited_deposit}",), DEPOSITS),
    Lookup("payflow.chain", "credited_ids", ("{credited_deposits}",), DEPOSITS),
    # payouts
    Lookup("payflow.chain.payouts", "lock_held_payout", ("{held_payout}",), PAYOUTS),
    Lookup("payflow.chain.payouts", "mark_signed", ("{held_payout}", "0xhot", "77"), PAYOUTS),
    Lookup("payflow.chain.payouts", "mark_sent", ("{signed_payout}",), PAYOUTS),
    Lookup("payflow.chain.payouts", "set_wait_reason", ("{held_payout}", "low balance"), PAYOUTS),
    Lookup(
        "payflow.chain.payouts",
        "record_landed",
        ("{signed_payout}", "0xtx", "1", "5", "0xblock"),
        PAYOUTS,
    ),
    Lookup("payflow.chain.payouts", "clear_landed", ("{signed_payout}",), PAYOUTS),
    Lookup(
        "payflow.chain.payouts",
        "finalize_payout",
        ("{signed_payout}", "confirmed", "0xtx", "1", "5", "0xblock", "0.001", None),
        PAYOUTS,
    ),
    Lookup("payflow.chain.payouts", "lock_open_payout", ("{signed_payout}",), PAYOUTS),
    Lookup("payflow.chain.payouts", "place_hold", ("{merchant_account}", "1"), ACCOUNTS),
    # tenant-scoped reads: a merchant's scope (`merchant_id = $2`) implies the predicate of
    # accounts_merchant_idx in a custom plan
    Lookup(
        "payflow.api",
        "get_account_scoped",
        ("{merchant_account}", "{merchant}", "false"),
        ACCOUNTS,
    ),
    Lookup(
        "payflow.console",
        "get_account",
        ("{merchant_account}", "{merchant}"),
        ACCOUNTS,
    ),
    Lookup(
        "payflow.api",
        "get_event_scoped",
        ("{pending_event}", "{merchant}", "false", "ledger.post:x"),
        {**EVENTS, **ACCOUNTS, "processed_events": _idx("processed_events_pkey")},
    ),
    Lookup(
        "payflow.api",
        "get_deposit_report_scoped",
        ("gen:plantest-unknown", "{merchant}", "false"),
        {
            "chain_deposit_reports": _idx("chain_deposit_reports_provider_id_unique"),
            **DEPOSITS,
            **ACCOUNTS,
        },
    ),
    Lookup(
        "payflow.console",
        "get_event",
        ("{pending_event}", "{merchant}"),
        {**EVENTS, **ACCOUNTS},
    ),
    Lookup(
        "payflow.console",
        "get_chain_deposit",
        ("{verified_deposit}", "{merchant}"),
        {**DEPOSITS, **ACCOUNTS},
    ),
    Lookup(
        "payflow.console", "get_payout", ("{held_payout}", "{merchant}"), {**PAYOUTS, **ACCOUNTS}
    ),
    Lookup(
        "payflow.console",
        "reports_of_transfer",
        ("{verified_deposit}", "PLANTEST", "{verified_tx}", "{merchant}"),
        {**ACCOUNTS, "chain_deposit_reports": _idx("chain_deposit_reports_once")},
    ),
    # payments
    Lookup(
        "payflow.payments",
        "claim_first_charge",
        ("{unclaimed_payment}", "claim-token", "30", "2000"),
        {**PAYMENTS, "charge_attempts": _idx("charge_attempts_payment_attempt_unique")},
    ),
    Lookup("payflow.payments", "supersede_charge_attempt", ("{open_attempt}",), ATTEMPTS),
    Lookup("payflow.payments", "release_charge_claim", ("{open_attempt}", "live"), ATTEMPTS),
    Lookup(
        "payflow.webhooks",
        "record_webhook_attempt",
        (
            "{undelivered_payment}",
            "true",
            "lease-token",
            "5",
            "2",
            "200",
            None,
            "2000",
            "{unpublished_job}",
        ),
        {**PAYMENTS, **OUTBOX},
    ),
    Lookup(
        "payflow.webhooks",
        "hand_back_direct_webhook",
        ("{undelivered_payment}", "lease-token", "{unpublished_job}", "2000"),
        {**PAYMENTS, **OUTBOX},
    ),
)


CASES = [pytest.param(lookup, id=lookup.id) for lookup in LOOKUPS]


def _literal(value: str | None, keys: dict[str, str]) -> str:
    if value is None:
        return "NULL"
    text = value.format(**keys)
    return "'" + text.replace("'", "''") + "'"


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def _describe(node: dict[str, Any]) -> str:
    parts = [node["Node Type"]]
    for key in ("Index Name", "Relation Name", "Alias", "Index Cond", "Recheck Cond", "Filter"):
        if key in node:
            parts.append(f"{key}: {node[key]}")
    return "; ".join(parts)


def wrong_scans(
    plan: dict[str, Any], through: dict[str, frozenset[str]], leading: dict[str, str]
) -> list[str]:
    """The scans of `through`'s tables that do not find their rows through one of the
    key's indexes with its leading column in the Index Cond (a sequential scan, another
    index, the key as a mere Filter, or a full scan of the right index with a condition on
    a later column only). `leading`: each index's first column."""
    wrong = []
    for node in _nodes(plan):
        table = node.get("Relation Name")
        if table not in through:
            continue
        allowed = through[table]
        kind = node["Node Type"]
        if kind == "ModifyTable":
            continue
        if kind in ("Index Scan", "Index Only Scan"):
            scans = [node]
        elif kind == "Bitmap Heap Scan":
            scans = [n for n in _nodes(node) if n["Node Type"] == "Bitmap Index Scan"]
        else:
            wrong.append(_describe(node))
            continue
        for scan in scans:
            index = scan.get("Index Name")
            condition = scan.get("Index Cond", "")
            if index not in allowed or not re.search(rf"\b{leading[index]}\b", condition):
                wrong.append(_describe(scan) + f" (table {table})")
    return wrong


async def leading_columns(conn: asyncpg.Connection) -> dict[str, str]:
    """Each index of the public schema by name, with the name of its first column."""
    rows = await conn.fetch(
        """SELECT c.relname AS index, a.attname AS column FROM pg_index i
           JOIN pg_class c ON c.oid = i.indexrelid
           JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'public'"""
    )
    return {r["index"]: r["column"] for r in rows}


@dataclass(frozen=True)
class PlanDatabase:
    """The filled database: its name, the rows of KEYS, each index's first column."""

    name: str
    keys: dict[str, str]
    leading: dict[str, str]


@pytest.fixture(scope="module")
async def plan_database(template_database: str) -> AsyncIterator[PlanDatabase]:
    """A migrated database in the worst case for partial indexes (`plans_world`):
    statistics from a quiet history, then thousands of rows in flight that the statistics
    never saw."""
    name = f"payflow_test_{RUN_ID}_plans_{uuid.uuid4().hex[:6]}"
    await clone_database(template_database, name)
    try:
        conn = await asyncpg.connect(_url(name))
        try:
            for table in TABLES:
                await conn.execute(
                    f"ALTER TABLE {table} SET (autovacuum_enabled = false,"
                    " toast.autovacuum_enabled = false)"
                )
            for statement in HISTORY:
                await conn.execute(statement)
            await conn.execute(f"VACUUM ANALYZE {', '.join(TABLES)}")
            for statement in IN_FLIGHT:
                await conn.execute(statement)
            # The worst case holds: the statistics say no row matches a partial predicate.
            stale = await conn.fetch(
                """SELECT c.relname, c.reltuples FROM pg_index i
                   JOIN pg_class c ON c.oid = i.indexrelid
                   JOIN pg_class t ON t.oid = i.indrelid
                   WHERE i.indpred IS NOT NULL AND t.relname = ANY($1::text[])
                     AND c.reltuples > 0""",
                list(TABLES),
            )
            assert not [r for r in stale if r["relname"] not in MATCHED_BY_HISTORY], stale
            keys = {key: await conn.fetchval(sql) for key, sql in KEYS.items()}
            leading = await leading_columns(conn)
        finally:
            await conn.close()
        assert all(keys.values()), keys
        yield PlanDatabase(name, keys, leading)
    finally:
        await _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def explain(
    conn: asyncpg.Connection, sql: str, args: str, mode: str, types: list[str] | None = None
) -> dict[str, Any]:
    """The plan of `sql` as a prepared statement (parameter `types`, else inferred) gets it
    in `mode`, executed with `args` (SQL literals, comma-separated)."""
    await conn.execute(f"SET plan_cache_mode = {mode}")
    declared = f"({', '.join(types)})" if types else ""
    await conn.execute(f"PREPARE lookup {declared} AS {sql}")
    try:
        raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE lookup({args})")
    finally:
        await conn.execute("DEALLOCATE lookup")
    plan: dict[str, Any] = json.loads(raw)[0]["Plan"]
    return plan


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("lookup", CASES)
async def test_key_lookup_finds_its_row_through_the_key(
    plan_database: PlanDatabase, lookup: Lookup, mode: str
) -> None:
    sql = load_queries(lookup.package)[lookup.name]
    args = ", ".join(_literal(p, plan_database.keys) for p in lookup.params)
    conn = await asyncpg.connect(app_url(plan_database.name))
    try:
        plan = await explain(conn, sql, args, mode)
    finally:
        await conn.close()
    wrong = wrong_scans(plan, lookup.through, plan_database.leading)
    assert not wrong, f"{lookup.id} ({mode}) does not find its row through its key: {wrong}"


async def test_the_finalize_function_finds_its_payment_through_the_key(
    plan_database: PlanDatabase,
) -> None:
    """`payment_finalize` (migration 0024) is a plpgsql function, so its statement is taken
    from the catalog as the database runs it: the CTE that locks and finalizes the payment,
    prepared with the function's own argument types, planned in both modes."""
    conn = await asyncpg.connect(app_url(plan_database.name))
    try:
        source, arg_types = await conn.fetchrow(
            "SELECT prosrc, ARRAY(SELECT format_type(t.oid, NULL)"
            "                     FROM unnest(proargtypes) WITH ORDINALITY AS t(oid, n)"
            "                     ORDER BY t.n)"
            " FROM pg_proc WHERE proname = 'payment_finalize'"
        )
        statement = source[source.index("WITH bound") : source.index(";")]
        statement = re.sub(r"\s+INTO\s+o_finalized.*?\n(\s+FROM)", r"\n\1", statement, flags=re.S)
        assert "INTO o_" not in statement
        pending = plan_database.keys["pending_payment"]
        given = {1: f"'{pending}'", 2: "'succeeded'", 14: "'approved'"}
        args = ", ".join(given.get(n, "NULL") for n in range(1, len(arg_types) + 1))
        for mode in ("force_custom_plan", "force_generic_plan"):
            plan = await explain(conn, statement, args, mode, arg_types)
            wrong = wrong_scans(plan, PAYMENTS, plan_database.leading)
            assert not wrong, f"payment_finalize ({mode}): {wrong}"
    finally:
        await conn.close()


# The rewrites spell a state as the states it is not (`status NOT IN ('succeeded',
# 'failed')` for 'pending'), which means the same only while each table's CHECK admits
# exactly these values: a new state must revisit every such statement.
STATE_SETS = {
    ("payments", "payments_status_valid"): {"pending", "succeeded", "failed"},
    ("charge_attempts", "charge_attempts_state_valid"): {
        "claimed",
        "approved",
        "declined",
        "superseded",
        "needs_review",
    },
    ("payouts", "payouts_status_valid"): {"held", "signed", "sent", "confirmed", "failed"},
    ("chain_deposits", "chain_deposits_status_valid"): {
        "verified",
        "orphaned",
        "credited",
        "reversed",
    },
    ("chain_deposit_reports", "chain_deposit_reports_status_valid"): {
        "pending",
        "confirmed",
        "refuted",
    },
    # recheck_tx names every source so that chain_deposit_reports_once can serve it
    ("chain_deposit_reports", "chain_deposit_reports_source_valid"): {
        "webhook",
        "alchemy",
        "scanner",
    },
}


async def test_the_state_sets_the_rewritten_lookups_rely_on(
    plan_database: PlanDatabase,
) -> None:
    conn = await asyncpg.connect(app_url(plan_database.name))
    try:
        for (table, constraint), expected in STATE_SETS.items():
            definition = await conn.fetchval(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE conrelid = $1::regclass AND conname = $2",
                table,
                constraint,
            )
            assert definition is not None, constraint
            assert set(re.findall(r"'([a-z_]+)'::text", definition)) == expected, definition
    finally:
        await conn.close()
