"""One-statement posting: `ledger_post_success`, the ledger's common path in one round trip.

A hot account (every payment of a merchant credits its settlement account) serialises on
its row lock, and before this revision the lock was held from the balance UPDATE until the
client's COMMIT arrived: one network hop plus however long the worker's event loop took to
resume the coroutine and send COMMIT. Under load that was ~10 ms a posting, so one merchant
could not be credited faster than ~100 times a second, whatever the cores.

`ledger_post_success(key, event_id, sources, credit_types, active_types, lock_timeout_ms)`
runs the whole success path of `payflow.ledger.posting` inside one statement,
sent in autocommit, so the row lock is held only while PostgreSQL itself works and commits:
  1. claim the idempotency key with its outcome `success` (a duplicate finds the claim and
     the function returns NULL having written nothing: the caller's full path replays it);
  2. move the event to `confirmed` from one of `sources` (the Python state machine's table
     decides them and passes them in);
  3. change the balance under the same guard as `apply_balance_change` (a debit never takes
     the balance below `held`; a frozen account refuses `active_types`), and append the
     ledger row with `balance_after`.
When 2 or 3 cannot be done it raises SQLSTATE PF001, which undoes the claim, and the caller
takes the full path (transactions, pessimistic refusal, overflow), which decides and
records every other outcome. Nothing is ever half-written: it is one statement.

The function runs with the caller's privileges (SECURITY INVOKER) and a pinned search path;
EXECUTE is revoked from PUBLIC and granted to the service role by this revision's grant hook.

Revision ID: 0020_one_statement_posting
Revises: 0019_attempt_log_retention
"""

from payflow.db.migrations.statements import execute_all

revision = "0020_one_statement_posting"
down_revision = "0019_attempt_log_retention"
branch_labels = None
depends_on = None

SIGNATURE = "ledger_post_success(text, text, text[], text[], text[], integer)"

UPGRADE: list[str] = [
    """
    CREATE FUNCTION ledger_post_success(
        p_key text,
        p_event_id text,
        p_sources text[],
        p_credit_types text[],
        p_active_types text[],
        p_lock_timeout_ms integer
    )
    RETURNS numeric
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_account uuid;
        v_amount numeric;
        v_type text;
        v_delta numeric;
        v_balance numeric;
    BEGIN
        -- Local to the statement's own transaction: waits on the claim, the event and the
        -- account are bounded like any payflow transaction's.
        PERFORM pg_catalog.set_config('lock_timeout', p_lock_timeout_ms::text, true);

        INSERT INTO processed_events (idempotency_key, event_id, outcome)
        VALUES (p_key, p_event_id, 'success')
        ON CONFLICT (idempotency_key) DO NOTHING;
        IF NOT FOUND THEN
            RETURN NULL;  -- posted (or being posted) by another delivery: nothing written
        END IF;

        UPDATE payment_events SET status = 'confirmed', updated_at = now()
        WHERE event_id = p_event_id AND status = ANY (p_sources)
        RETURNING account_id, amount, event_type INTO v_account, v_amount, v_type;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'event % cannot be confirmed here', p_event_id
                USING ERRCODE = 'PF001';
        END IF;

        v_delta := CASE WHEN v_type = ANY (p_credit_types) THEN v_amount ELSE -v_amount END;
        UPDATE accounts
        SET balance = balance + v_delta, updated_at = now()
        WHERE id = v_account
          AND balance + v_delta >= held
          AND (NOT (v_type = ANY (p_active_types)) OR status = 'active')
        RETURNING balance INTO v_balance;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'event %: the balance change is refused', p_event_id
                USING ERRCODE = 'PF001';
        END IF;

        INSERT INTO balance_events (account_id, amount, event_type, source_event_id,
                                    balance_after)
        VALUES (v_account, v_delta, v_type, p_event_id, v_balance);
        RETURN v_balance;
    END
    $$
    """,
    f"REVOKE ALL ON FUNCTION {SIGNATURE} FROM PUBLIC",
    f"""
    CREATE FUNCTION payflow_grant_extra_0020_one_statement_posting(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.{SIGNATURE} TO %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0020_one_statement_posting(name) FROM PUBLIC",
]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_extra_0020_one_statement_posting(name)",
    f"DROP FUNCTION {SIGNATURE}",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
