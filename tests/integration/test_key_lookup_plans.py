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

# The history: terminal rows only, so no partial index's predicate matches a row when the
# statistics are taken (the worst case: a VACUUM ANALYZE on a quiet ledger).
HISTORY: tuple[str, ...] = (
    "INSERT INTO chains (chain, native_asset, native_decimals) VALUES ('PLANTEST', 'ETH', 18)",
    """INSERT INTO merchants (name, api_key_hash, webhook_secret)
       SELECT 'merchant ' || g, 'plan-key-' || g, 'secret' FROM generate_series(1, 300) AS g""",
    """INSERT INTO accounts (asset, balance, initial_balance)
       SELECT 'USD', 1000, 1000 FROM generate_series(1, 4000)""",
    """INSERT INTO payment_events (event_id, account_id, amount, event_type, status)
       SELECT 'history-' || g, a.ids[1 + g % 1000], 1, 'deposit', 'confirmed'
       FROM generate_series(1, 6000) AS g,
            (SELECT array_agg(id ORDER BY id) AS ids FROM accounts) AS a""",
    """INSERT INTO processed_events (idempotency_key, event_id, outcome)
       SELECT 'history-key-' || g, 'history-' || g, 'success' FROM generate_series(1, 6000) AS g""",
    """INSERT INTO payments (merchant_id, amount, currency, idempotency_key, webhook_url, status,
                            processed_at, webhook_delivered_at)
       SELECT m.ids[1 + g % 300], 5, 'USD', 'history-' || g, 'https://shop.example/hook',
              CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'succeeded' END, now(), now()
       FROM generate_series(1, 6000) AS g,
            (SELECT array_agg(id ORDER BY id) AS ids FROM merchants) AS m""",
    """INSERT INTO charge_attempts (payment_id, attempt, state, claimed_by, lease_until,
                                   answered_at)
       SELECT id, 1, CASE status WHEN 'failed' THEN 'declined' ELSE 'approved' END, 'history',
              now(), now()
       FROM payments""",
    """INSERT INTO dead_letter_queue (source, subject_id, error, attempt, resolved_at,
                                     resolved_by, resolution)
       SELECT 'payment_event', 'history-' || g, 'boom', 1, now(), 'operator', 'replayed'
       FROM generate_series(1, 3000) AS g""",
    """INSERT INTO outbox (topic, payload, published_at, publish_attempts)
       SELECT 'ledger.event', jsonb_build_object('event_id', 'history-' || g), now(), 1
       FROM generate_series(1, 6000) AS g""",
    """INSERT INTO unmatched_provider_events (event_id, reason, chain, payload, reviewed_at)
       SELECT 'history-' || g, 'unknown_address', 'PLANTEST', '{}', now()
       FROM generate_series(1, 3000) AS g""",
    """INSERT INTO alerts (key, severity, message, resolved_at)
       SELECT 'history-' || (g % 50), 'warning', 'old', now() FROM generate_series(1, 3000) AS g""",
    """INSERT INTO chain_deposits (transfer_id, chain, tx_hash, position, to_address, units,
                                  account_id, asset, amount, status, block_number, block_hash,
                                  sources, credit_event_id, reversal_event_id)
       SELECT 'PLANTEST:' || t.h || ':0', 'PLANTEST', t.h, 0, '0x' || lpad(to_hex(t.g), 40, '0'),
              1, a.ids[1 + t.g % 1000], 'USD', 1, 'reversed', t.g, t.h, ARRAY['scanner'],
              'history-credit-' || t.g, 'history-reversal-' || t.g
       FROM (SELECT g, '0x' || lpad(to_hex(g), 64, '0') AS h FROM generate_series(1, 3000) AS g)
            AS t,
            (SELECT array_agg(id ORDER BY id) AS ids FROM accounts) AS a""",
    """INSERT INTO chain_deposit_reports (source, chain, tx_hash, position, claim, to_address,
                                         units, account_id, amount, status, transfer_id,
                                         decided_at)
       SELECT 'scanner', chain, tx_hash, 0, 'claim', to_address, 1, account_id, 1, 'confirmed',
              transfer_id, now()
       FROM chain_deposits""",
    """INSERT INTO payouts (merchant_id, idempotency_key, account_id, asset, chain, to_address,
                           decimals, amount, fee_hold, status, hot_wallet, nonce, finalized_at)
       SELECT m.ids[1], 'history-' || g, a.ids[1 + g % 1000], 'ETH', 'PLANTEST',
              '0x' || lpad(to_hex(g), 40, '0'), 18, 1, 0, 'confirmed', '0xhot', g, now()
       FROM generate_series(1, 3000) AS g,
            (SELECT array_agg(id ORDER BY id) AS ids FROM merchants) AS m,
            (SELECT array_agg(id ORDER BY id) AS ids FROM accounts) AS a""",
)

# The work in flight, arrived after the statistics: thousands of rows matching every
# partial index's predicate.
IN_FLIGHT: tuple[str, ...] = (
    # One merchant with many accounts (accounts_merchant_idx), and settlement accounts.
    """INSERT INTO accounts (asset, merchant_id)
       SELECT 'USD', (SELECT min(id::text)::uuid FROM merchants) FROM generate_series(1, 2000)""",
    """INSERT INTO accounts (asset, merchant_id, settlement)
       SELECT s.code, m.id, true FROM merchants AS m, assets AS s""",
    """INSERT INTO payment_events (event_id, account_id, amount, event_type, status)
       SELECT 'live-' || g, a.ids[1 + g % 1000], 1, 'deposit',
              (ARRAY['pending', 'enqueued', 'processing'])[1 + g % 3]
       FROM generate_series(1, 4500) AS g,
            (SELECT array_agg(id ORDER BY id) AS ids FROM accounts WHERE merchant_id IS NULL)
            AS a""",
    """INSERT INTO processed_events (idempotency_key, event_id, outcome)
       SELECT 'live-key-' || g, 'live-' || g, 'pending' FROM generate_series(1, 1500) AS g""",
    """INSERT INTO payments (merchant_id, amount, currency, idempotency_key, webhook_url)
       SELECT m.ids[1 + g % 300], 5, 'USD', 'live-' || g, 'https://shop.example/hook'
       FROM generate_series(1, 2000) AS g,
            (SELECT array_agg(id ORDER BY id) AS ids FROM merchants) AS m""",
    # Final payments whose webhook is not delivered yet (payments_webhook_sweep_idx).
    """INSERT INTO payments (merchant_id, amount, currency, idempotency_key, webhook_url, status,
                            processed_at)
       SELECT m.ids[1 + g % 300], 5, 'USD', 'live-final-' || g, 'https://shop.example/hook',
              'succeeded', now()
       FROM generate_series(1, 1500) AS g,
            (SELECT array_agg(id ORDER BY id) AS ids FROM merchants) AS m""",
    # Open attempts for three quarters of the pending payments (the rest: never claimed).
    """INSERT INTO charge_attempts (payment_id, attempt, state, claimed_by, lease_until)
       SELECT id, 1, CASE WHEN n % 4 = 0 THEN 'needs_review' ELSE 'claimed' END, 'live',
              now() + interval '1 hour'
       FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM payments
             WHERE status = 'pending') AS p
       WHERE n <= 1500""",
    """INSERT INTO dead_letter_queue (source, subject_id, error, attempt)
       SELECT 'payment_event', 'live-' || g, 'boom', 1 FROM generate_series(1, 1500) AS g""",
    """INSERT INTO outbox (topic, payload)
       SELECT 'ledger.event', jsonb_build_object('event_id', 'live-' || g)
       FROM generate_series(1, 2000) AS g""",
    """INSERT INTO unmatched_provider_events (event_id, reason, chain, payload)
       SELECT 'live-' || g, 'unknown_address', 'PLANTEST', '{}'
       FROM generate_series(1, 1500) AS g""",
    """INSERT INTO alerts (key, severity, message)
       SELECT 'live-' || g, 'warning', 'open' FROM generate_series(1, 1500) AS g""",
    """INSERT INTO chain_deposits (transfer_id, chain, tx_hash, position, to_address, units,
                                  account_id, asset, amount, status, block_number, block_hash,
                                  sources, credit_event_id)
       SELECT 'PLANTEST:' || t.h || ':0', 'PLANTEST', t.h, 0, '0x' || lpad(to_hex(t.g), 40, '0'),
              1, a.ids[1 + t.g % 1000], 'USD', 1, t.status, t.g, t.h, ARRAY['scanner'],
              CASE WHEN t.status = 'credited' THEN 'live-credit-' || t.g END
       FROM (SELECT g, '0x' || lpad(to_hex(g), 64, '0') AS h,
                    CASE WHEN g <= 11500 THEN 'verified' WHEN g <= 12000 THEN 'orphaned'
                         ELSE 'credited' END AS status
             FROM generate_series(10001, 14000) AS g) AS t,
            (SELECT array_agg(id ORDER BY id) AS ids FROM accounts WHERE merchant_id IS NULL)
            AS a""",
    """INSERT INTO chain_deposit_reports (source, chain, tx_hash, position, claim, to_address,
                                         units, account_id, amount, status, reason)
       SELECT 'scanner', chain, tx_hash, 0, 'claim', to_address, 1, account_id, 1,
              CASE WHEN block_number <= 11500 THEN 'pending' ELSE 'refuted' END,
              CASE WHEN block_number > 11500 THEN 'not on chain' END
       FROM chain_deposits WHERE block_number BETWEEN 10001 AND 12500""",
    """INSERT INTO payouts (merchant_id, idempotency_key, account_id, asset, chain, to_address,
                           decimals, amount, fee_hold, status, hot_wallet, nonce)
       SELECT m.ids[1], 'live-' || g, a.ids[1 + g % 1000], 'ETH', 'PLANTEST',
              '0x' || lpad(to_hex(g), 40, '0'), 18, 1, 0,
              CASE WHEN g <= 1000 THEN 'held' WHEN g <= 1500 THEN 'signed' ELSE 'sent' END,
              CASE WHEN g > 1000 THEN '0xhot' END, CASE WHEN g > 1000 THEN 10000 + g END
       FROM generate_series(1, 2000) AS g,
            (SELECT array_agg(id ORDER BY id) AS ids FROM merchants) AS m,
            (SELECT array_agg(id ORDER BY id) AS ids FROM accounts WHERE merchant_id IS NULL)
            AS a""",
)

# Partial indexes whose predicate the history itself matches (answered attempts, published
# jobs): no key lookup's condition implies them.
MATCHED_BY_HISTORY = frozenset({"charge_attempts_one_answer", "outbox_published_idx"})

TABLES = (
    "accounts",
    "alerts",
    "chain_deposit_reports",
    "chain_deposits",
    "charge_attempts",
    "dead_letter_queue",
    "merchants",
    "outbox",
    "payment_events",
    "payments",
    "payouts",
    "processed_events",
    "unmatched_provider_events",
)

# Real-looking parameters: keys of rows in flight (each matches a partial predicate).
KEYS: dict[str, str] = {
    "merchant": "SELECT min(id::text) FROM merchants",
    "merchant_account": """SELECT min(id::text) FROM accounts
                           WHERE merchant_id = (SELECT min(id::text)::uuid FROM merchants)""",
    "pending_event": "SELECT min(event_id) FROM payment_events WHERE status = 'pending'",
    "pending_events": """SELECT array_agg(event_id)::text FROM (
                             SELECT event_id FROM payment_events WHERE status = 'pending'
                             ORDER BY event_id LIMIT 20) AS e""",
    "enqueued_event": "SELECT min(event_id) FROM payment_events WHERE status = 'enqueued'",
    "unclaimed_payment": """SELECT min(p.id::text) FROM payments p WHERE p.status = 'pending'
                            AND NOT EXISTS (SELECT 1 FROM charge_attempts a
                                            WHERE a.payment_id = p.id)""",
    "pending_payment": "SELECT min(id::text) FROM payments WHERE status = 'pending'",
    "undelivered_payment": """SELECT min(id::text) FROM payments WHERE status <> 'pending'
                              AND webhook_delivered_at IS NULL""",
    "open_attempt": "SELECT min(attempt_id::text) FROM charge_attempts WHERE state = 'claimed'",
    "unpublished_job": "SELECT min(id)::text FROM outbox WHERE published_at IS NULL",
    "dead_letter": "SELECT min(id)::text FROM dead_letter_queue WHERE resolved_at IS NULL",
    "verified_deposit": "SELECT min(transfer_id) FROM chain_deposits WHERE status = 'verified'",
    "verified_block": """SELECT block_hash FROM chain_deposits WHERE transfer_id =
                         (SELECT min(transfer_id) FROM chain_deposits WHERE status = 'verified')""",
    "verified_tx": """SELECT tx_hash FROM chain_deposits WHERE transfer_id =
                      (SELECT min(transfer_id) FROM chain_deposits WHERE status = 'verified')""",
    "credited_deposit": "SELECT min(transfer_id) FROM chain_deposits WHERE status = 'credited'",
    "credited_deposits": """SELECT array_agg(transfer_id)::text FROM (
                                SELECT transfer_id FROM chain_deposits
                                WHERE status = 'credited' ORDER BY transfer_id LIMIT 20) AS d""",
    "pending_report": "SELECT min(id)::text FROM chain_deposit_reports WHERE status = 'pending'",
    "held_payout": "SELECT min(id::text) FROM payouts WHERE status = 'held'",
    "signed_payout": "SELECT min(id::text) FROM payouts WHERE status = 'signed'",
}


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
        "payflow.ops",
        "resolve_dead_letter",
        ("{dead_letter}", "operator", "replayed"),
        {"dead_letter_queue": _idx("dead_letter_queue_pkey")},
    ),
    Lookup("payflow.ops", "count_payment_sweep", ("{pending_payment}",), PAYMENTS),
    Lookup("payflow.ops", "count_webhook_sweep", ("{undelivered_payment}",), PAYMENTS),
    Lookup("payflow.ops", "mark_webhook_dead", ("{undelivered_payment}",), PAYMENTS),
    # alerts: the open-incident index is keyed by the alert's key
    Lookup(
        "payflow.ops.alerting",
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
        "payflow.payments",
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
        "payflow.payments",
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


@pytest.fixture(scope="module")
async def plan_database(template_database: str) -> AsyncIterator[tuple[str, dict[str, str]]]:
    """A migrated database in the worst case for partial indexes: statistics from a quiet
    history, then thousands of rows in flight that the statistics never saw. Yields the
    database name and the keys of KEYS."""
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
        finally:
            await conn.close()
        assert all(keys.values()), keys
        yield name, keys
    finally:
        await _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def explain(
    conn: asyncpg.Connection, lookup: Lookup, keys: dict[str, str], mode: str
) -> dict[str, Any]:
    """The plan of `lookup` as the service's prepared statement gets it in `mode`."""
    sql = load_queries(lookup.package)[lookup.name]
    await conn.execute(f"SET plan_cache_mode = {mode}")
    await conn.execute(f"PREPARE lookup AS {sql}")
    try:
        args = ", ".join(_literal(p, keys) for p in lookup.params)
        raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE lookup({args})")
    finally:
        await conn.execute("DEALLOCATE lookup")
    plan: dict[str, Any] = json.loads(raw)[0]["Plan"]
    return plan


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("lookup", CASES)
async def test_key_lookup_finds_its_row_through_the_key(
    plan_database: tuple[str, dict[str, str]], lookup: Lookup, mode: str
) -> None:
    name, keys = plan_database
    conn = await asyncpg.connect(app_url(name))
    try:
        plan = await explain(conn, lookup, keys, mode)
        leading = await leading_columns(conn)
    finally:
        await conn.close()
    wrong = wrong_scans(plan, lookup.through, leading)
    assert not wrong, f"{lookup.id} ({mode}) does not find its row through its key: {wrong}"


async def test_the_finalize_function_finds_its_payment_through_the_key(
    plan_database: tuple[str, dict[str, str]],
) -> None:
    """`payment_finalize` (migration 0024) is a plpgsql function, so its statement is taken
    from the catalog as the database runs it: the CTE that locks and finalizes the payment,
    prepared with the function's own argument types, planned in both modes."""
    name, keys = plan_database
    conn = await asyncpg.connect(app_url(name))
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
        args = {1: f"'{keys['pending_payment']}'", 2: "'succeeded'", 14: "'approved'"}
        values = ", ".join(args.get(n, "NULL") for n in range(1, len(arg_types) + 1))
        for mode in ("force_custom_plan", "force_generic_plan"):
            await conn.execute(f"SET plan_cache_mode = {mode}")
            await conn.execute(f"PREPARE finalize ({', '.join(arg_types)}) AS {statement}")
            try:
                raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE finalize({values})")
            finally:
                await conn.execute("DEALLOCATE finalize")
            wrong = wrong_scans(json.loads(raw)[0]["Plan"], PAYMENTS, await leading_columns(conn))
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
    plan_database: tuple[str, dict[str, str]],
) -> None:
    name, _keys = plan_database
    conn = await asyncpg.connect(app_url(name))
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
