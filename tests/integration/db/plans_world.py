"""The database `test_key_lookup_plans` plans on: the worst case for partial indexes.

A history of terminal rows only (no row matches any partial index's predicate) is VACUUM
ANALYZEd with autovacuum off, then thousands of rows in flight arrive that match every
predicate and that the statistics never saw. `KEYS` names rows of each kind by the
statement that finds one.
"""

from __future__ import annotations

# The history: terminal rows only, so no partial index's predicate matches a row when the
# statistics are taken (the worst case: a VACUUM ANALYZE on a quiet ledger).
HISTORY: tuple[str, ...] = (
    "INSERT INTO chains (chain, native_asset, native_decimals) VALUES ('PLANTEST', 'ETH', 18)",
    """INSERT INTO merchants (name, webhook_secret)
       SELECT 'merchant ' || g, 'secret' FROM generate_series(1, 300) AS g""",
    """INSERT INTO api_keys (merchant_id, name, scope, key_hash)
       SELECT id, 'default', 'write', 'plan-key-' || name FROM merchants""",
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
