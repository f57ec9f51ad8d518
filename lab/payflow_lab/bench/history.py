"""A filled ledger for `payflow bench e2e`: history written before the load, then VACUUM
ANALYZE, so the run measures the service on tables of a working size, not on tables
growing from empty (where autovacuum and ANALYZE fire every few hundred rows and every
ANALYZE makes each backend plan its statements again).

`fill_history` gives a merchant of its own ("history") `count` succeeded USD payments
of 10.00 spread over the last 20 hours, each as the pipeline would have left it: its
idempotency record, its answered charge attempt, its confirmed `payment_credit` event,
the posting's `processed_events` key and `balance_events` row (running `balance_after`),
and its published `payment.created` job. The settlement account holds the sum, so
`recon --full` stays clean. Everything is inside the retention windows (24 h for
idempotency records and published jobs, 90 days for posting keys), so no cleanup job
deletes it while the load runs. One statement, as the migration login (the service's
role may not VACUUM).
"""

from __future__ import annotations

from decimal import Decimal

import asyncpg

HISTORY_AMOUNT = Decimal("10.00")  # each history payment's amount, USD

FILL = """
WITH m AS (
    INSERT INTO merchants (name, webhook_secret)
    VALUES ('history', 'whsec_history')
    RETURNING id
), acct AS (
    INSERT INTO accounts (asset, balance, merchant_id, settlement)
    SELECT 'USD', $2::numeric * $1, m.id, true FROM m
    RETURNING id, merchant_id
), g AS (
    SELECT n, gen_random_uuid() AS payment_id,
           now() - make_interval(secs => 72000.0 * n / $1) AS at
    FROM generate_series(1, $1) AS n
), p AS (
    INSERT INTO payments (id, merchant_id, amount, currency, description, metadata, status,
                          idempotency_key, created_at, processed_at)
    SELECT g.payment_id, acct.merchant_id, $2::numeric, 'USD', 'history', '{"order": "h"}',
           'succeeded', 'history-' || g.n, g.at, g.at + interval '3 seconds'
    FROM g, acct
), i AS (
    INSERT INTO api_idempotency (merchant_id, scope, key, request_hash, state,
                                 response_status, response_body, created_at)
    SELECT acct.merchant_id, 'payments.create', 'history-' || g.n, md5(g.n::text),
           'completed', 202, json_build_object('payment_id', g.payment_id::text), g.at
    FROM g, acct
), c AS (
    INSERT INTO charge_attempts (payment_id, attempt, state, claimed_by, claimed_at,
                                 lease_until, gateway_reference, answered_at)
    SELECT g.payment_id, 1, 'approved', 'history', g.at, g.at + interval '30 seconds',
           'gw-history-' || g.n, g.at + interval '3 seconds'
    FROM g
), e AS (
    INSERT INTO payment_events (event_id, account_id, amount, event_type, status,
                                created_at, updated_at)
    SELECT 'history-credit-' || g.n, acct.id, $2::numeric, 'payment_credit', 'confirmed',
           g.at, g.at
    FROM g, acct
), k AS (
    INSERT INTO processed_events (idempotency_key, event_id, outcome, created_at)
    SELECT 'history-credit-' || g.n || ':success', 'history-credit-' || g.n, 'success', g.at
    FROM g
), legs AS (
    -- The counterparty of each credit (double-entry books): gateway:USD.
    INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind, created_at)
    SELECT 'history-credit-' || g.n, ledger_account('gateway', NULL, 'USD'), -$2::numeric,
           'payment_credit', g.at
    FROM g
), b AS (
    INSERT INTO balance_events (account_id, amount, event_type, source_event_id,
                                balance_after, created_at)
    SELECT acct.id, $2::numeric, 'payment_credit', 'history-credit-' || g.n,
           $2::numeric * ($1 - g.n + 1), g.at
    FROM g, acct
)
INSERT INTO outbox (topic, payload, created_at, published_at, publish_attempts)
SELECT 'payment.created', jsonb_build_object('version', 1, 'payment_id', g.payment_id::text),
       g.at, g.at, 1
FROM g
"""


async def fill_history(setup_url: str, count: int) -> None:
    """Write `count` finished payments (see the module docstring), then VACUUM ANALYZE.

    `setup_url` is the migration login on the bench database (`common.setup_url`).
    `count` 0 writes nothing and still runs VACUUM ANALYZE.
    """
    conn = await asyncpg.connect(setup_url)
    try:
        if count:
            await conn.execute(FILL, count, HISTORY_AMOUNT)
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()
