"""Every money event of a merchant is recorded in its stream, once, through one function.

* `merchant_event_record(p_merchant, p_type, p_subject, p_data)` (SECURITY DEFINER): the
  one way into `merchant_events`. It inserts the event under a new id (`evt_` + 32 hex
  digits) and returns that id, or NULL when this (type, subject) was recorded already
  (`merchant_events_once`: a retried or replayed cause records nothing twice). The
  service role may call it and read the table, and no longer insert into it directly: a
  later revision may replace the function (same signature) to do more with each new
  event, and every event then goes through it.
* `payment_finalize` records `payment.succeeded` / `payment.failed` in the statement that
  moves the payment (subject: the payment's id), with the payment's amount as a string at
  its currency's scale, its currency, status, description and metadata. The body is
  0024's with one block added before the posting step, by an exact substitution that must
  match once; the downgrade restores 0024's body.

Deposits and payouts record their events from Python (`payflow.webhooks.record_event`,
which calls the same function) in the transaction of the change.

Revision ID: 0037_event_emission
Revises: 0036_event_legs_checked_once
"""

import importlib

from payflow.db.migrations.statements import execute_all

revision = "0037_event_emission"
down_revision = "0036_event_legs_checked_once"
branch_labels = None
depends_on = None

_0024 = importlib.import_module("payflow.db.migrations.versions.0024_finalize_key_lookup")
_0032 = importlib.import_module("payflow.db.migrations.versions.0032_definer_postings")

RECORD = "merchant_event_record(uuid, text, text, jsonb)"

RECORD_FUNCTION = """
    CREATE FUNCTION merchant_event_record(p_merchant uuid, p_type text, p_subject text,
                                          p_data jsonb)
    RETURNS text
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_id text;
    BEGIN
        INSERT INTO merchant_events (id, merchant_id, type, subject_id, data)
        VALUES ('evt_' || replace(gen_random_uuid()::text, '-', ''), p_merchant, p_type,
                p_subject, p_data)
        ON CONFLICT ON CONSTRAINT merchant_events_once DO NOTHING
        RETURNING id INTO v_id;
        RETURN v_id;
    END
    $$
"""

# Inserted before 0024's posting step, so the event commits with the status change and
# is undone with it when that step raises (the caller then finalizes in a transaction,
# which records it).
POSTING_STEP = "        IF $20 IS NULL OR NOT o_finalized OR NOT o_credited OR $5 IS NULL THEN\n"
EVENT_STEP = """        IF o_finalized THEN
            -- The merchant's event of this outcome (subject: the payment), amounts as
            -- text at the currency's scale, never fewer digits than stored.
            PERFORM merchant_event_record(
                p.merchant_id, 'payment.' || p.status, p.id::text,
                jsonb_build_object(
                    'payment_id', p.id::text,
                    'status', p.status,
                    'amount', round(trim_scale(p.amount),
                                    greatest(coalesce(s.scale, 0),
                                             scale(trim_scale(p.amount))))::text,
                    'currency', p.currency,
                    'description', p.description,
                    'metadata', p.metadata,
                    'created_at', to_char(p.created_at AT TIME ZONE 'UTC',
                                          'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                    'processed_at', to_char(p.processed_at AT TIME ZONE 'UTC',
                                            'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))
            FROM payments p LEFT JOIN assets s ON s.code = p.currency
            WHERE p.id = $1;
        END IF;
"""


def _finalize_0024() -> str:
    """0024's `CREATE OR REPLACE FUNCTION payment_finalize` statement."""
    [body] = _0024.upgrade_statements()
    return str(body)


def _finalize_with_event() -> str:
    """0024's body with the event step; `RuntimeError` when 0024's body is not the one
    this revision rewrites (checked when the step runs)."""
    body = _finalize_0024()
    if body.count(POSTING_STEP) != 1:
        raise RuntimeError("0024's payment_finalize is not the body 0037 rewrites")
    return body.replace(POSTING_STEP, EVENT_STEP + "\n" + POSTING_STEP)


GRANT_HOOK = f"""
    CREATE FUNCTION payflow_grant_extra_0037_event_emission(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        -- Events are recorded only through merchant_event_record (after 0035's hook,
        -- which granted INSERT: the hooks run in name order).
        EXECUTE format('REVOKE INSERT ON public.merchant_events FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.{RECORD} TO %I', app);
    END
    $$
"""


def upgrade_statements() -> list[str]:
    """The record function, payment_finalize recording through it, the grant hook."""
    return [
        RECORD_FUNCTION,
        f"REVOKE ALL ON FUNCTION {RECORD} FROM PUBLIC",
        _finalize_with_event(),
        GRANT_HOOK,
        "REVOKE ALL ON FUNCTION payflow_grant_extra_0037_event_emission(name) FROM PUBLIC",
        _0032.APPLY_HOOK,
    ]


def downgrade_statements() -> list[str]:
    """0024's payment_finalize, this revision's functions dropped, grants re-run."""
    return [
        _finalize_0024(),
        "DROP FUNCTION payflow_grant_extra_0037_event_emission(name)",
        f"DROP FUNCTION {RECORD}",
        _0032.REGRANT,
    ]


def upgrade() -> None:
    execute_all(upgrade_statements())


def downgrade() -> None:
    execute_all(downgrade_statements())
