"""Only the posting functions move money: the service role loses its direct writes to the
journal, the balances and the holds, and calls SECURITY DEFINER posting functions instead.

Until this revision the service role (the app role) could INSERT into `balance_events`,
`ledger_legs` and `ledger_transfers`, UPDATE `accounts.balance` and `accounts.held`, and
insert an account with any `balance` or `initial_balance`: with the service's own
credentials plain SQL could write a confirmed event, its ledger row and the balance change,
and the deferred balance check only asked that the legs sum to zero. From this revision:

* the writers are functions owned by the owner role, SECURITY DEFINER, search path pinned
  (`public, pg_catalog, pg_temp`: schema `public` is the owner's and closed to CREATE for
  everyone else, `payflow migrate` refuses an app role that could create in it):
  - `ledger_post_success` (0020, 0029): the one-statement success path, now a definer;
  - `ledger_apply_balance_change` (new): the full path's guarded balance change with the
    customer leg and the counterparty leg, which the query `apply_balance_change` was;
    NULL when the guard refuses (the query returned no row), so posting.py is unchanged;
  - `ledger_post_opening` (0029): a definer the service role may NOT execute (an opening
    balance is an operator's act, with the migration login); it also records the amount
    in `initial_balance`, which the service can no longer write;
  - `ledger_place_hold(account, amount)` and `ledger_release_payout_hold(payout)` (new):
    the only writers of `accounts.held` (a payout's hold, an operator's fee-hold raise, the
    release when the payout is final).
* each validates its arguments against the database's own records (a definer function is
  a privilege boundary): amounts positive; the success path's key must be the event's
  posting key, its statuses only the open ones, its credit types exactly the credit types
  (the sign of a leg comes from the event type, never from the caller) and its frozen-
  account types at least the debits; the full path's account, signed amount and type must
  be the event's own, the event must be being posted (processing or confirmed) under its
  posting claim; a release names a payout that is final and releases exactly its hold.
  No argument reaches dynamic SQL.
* grant hook `payflow_grant_extra_0032_definer_postings` (run by `payflow migrate` and the
  test template after the earlier hooks, so it narrows what 0009, 0015 and 0029 granted):
  no INSERT, UPDATE or DELETE on `balance_events`, `ledger_legs`, `ledger_transfers`,
  `ledger_accounts`; UPDATE of `accounts` only `status` and `updated_at`; INSERT into
  `accounts` only of columns that carry no money (`balance`, `held`, `initial_balance`
  take their default 0); EXECUTE on the posting functions except the opening.

The upgrade applies the hook to every role already granted on `accounts` (so an upgrade on
its own closes the door); the downgrade restores 0029's functions and re-runs the grant
functions for those roles, which gives back exactly the previous privileges.

Revision ID: 0032_definer_postings
Revises: 0031_gas_shortfall_adjustments
"""

import importlib

from payflow.db.migrations.statements import execute_all

revision = "0032_definer_postings"
down_revision = "0031_gas_shortfall_adjustments"
branch_labels = None
depends_on = None

_0029 = importlib.import_module("payflow.db.migrations.versions.0029_double_entry_books")
_0030 = importlib.import_module("payflow.db.migrations.versions.0030_treasury_sweeps")

POST_SUCCESS = "ledger_post_success(text, text, text[], text[], text[], integer)"
APPLY = "ledger_apply_balance_change(uuid, numeric, text, text, boolean)"
OPENING = "ledger_post_opening(uuid, numeric)"
PLACE_HOLD = "ledger_place_hold(uuid, numeric)"
RELEASE_HOLD = "ledger_release_payout_hold(uuid)"
POSTING_KEY = "ledger_posting_key(text)"

# The event types whose customer leg is a credit (payflow.ledger.records.EventType.is_credit)
# and those a frozen account refuses (requires_active); tests/unit keeps them in step.
CREDIT_TYPES = ("airdrop", "deposit", "payment_credit")
ACTIVE_TYPES = ("withdrawal", "withdrawal_fee")
OPEN_STATUSES = ("enqueued", "pending", "processing")


def _array(values: tuple[str, ...]) -> str:
    return "ARRAY[" + ", ".join(f"'{v}'" for v in values) + "]::text[]"


FUNCTIONS: list[str] = [
    # payflow.idempotency.idempotency_key("ledger.post", event_id), computed by the server.
    """
    CREATE FUNCTION ledger_posting_key(p_event_id text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT
    SET search_path = pg_catalog, pg_temp
    AS $$
        SELECT pg_catalog.encode(pg_catalog.sha256(
            pg_catalog.int8send(2) || pg_catalog.int8send(11)
            || pg_catalog.convert_to('ledger.post', 'UTF8')
            || pg_catalog.int8send(pg_catalog.octet_length(
                   pg_catalog.convert_to(p_event_id, 'UTF8')))
            || pg_catalog.convert_to(p_event_id, 'UTF8')), 'hex')
    $$
    """,
    f"""
    CREATE OR REPLACE FUNCTION ledger_post_success(
        p_key text,
        p_event_id text,
        p_sources text[],
        p_credit_types text[],
        p_active_types text[],
        p_lock_timeout_ms integer
    )
    RETURNS numeric
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_account uuid;
        v_amount numeric;
        v_type text;
        v_delta numeric;
        v_balance numeric;
        v_counterparty text;
    BEGIN
        -- A privilege boundary: the caller's arguments are checked, never trusted.
        IF p_event_id IS NULL OR p_key IS DISTINCT FROM ledger_posting_key(p_event_id) THEN
            RAISE EXCEPTION 'ledger_post_success: the key is not the posting key of event %',
                p_event_id USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_sources IS NULL OR NOT p_sources <@ {_array(OPEN_STATUSES)}
           OR array_position(p_sources, NULL) IS NOT NULL THEN
            RAISE EXCEPTION 'ledger_post_success: an event is confirmed only from an open status'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_credit_types IS NULL OR NOT (p_credit_types @> {_array(CREDIT_TYPES)}
                                          AND p_credit_types <@ {_array(CREDIT_TYPES)}) THEN
            RAISE EXCEPTION 'ledger_post_success: the credit types are not %',
                {_array(CREDIT_TYPES)} USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_active_types IS NULL OR NOT p_active_types @> {_array(ACTIVE_TYPES)} THEN
            RAISE EXCEPTION 'ledger_post_success: a frozen account refuses at least %',
                {_array(ACTIVE_TYPES)} USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_lock_timeout_ms IS NULL OR p_lock_timeout_ms NOT BETWEEN 0 AND 3600000 THEN
            RAISE EXCEPTION 'ledger_post_success: lock timeout % ms out of range',
                p_lock_timeout_ms USING ERRCODE = 'invalid_parameter_value';
        END IF;

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

        -- The other side of the posting: a system account, which keeps no balance row.
        v_counterparty := ledger_counterparty(
            p_event_id, v_type, (SELECT a.asset FROM accounts a WHERE a.id = v_account));

        -- The sign comes from the event type (checked equal to the caller's list above).
        v_delta := CASE WHEN v_type = ANY ({_array(CREDIT_TYPES)}) THEN v_amount
                        ELSE -v_amount END;
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
        INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind)
        VALUES (p_event_id, v_counterparty, -v_delta, v_type);
        RETURN v_balance;
    END
    $$
    """,
    f"""
    CREATE FUNCTION ledger_apply_balance_change(
        p_account uuid,
        p_delta numeric,
        p_type text,
        p_event_id text,
        p_active_only boolean
    )
    RETURNS numeric
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_event record;
        v_expected numeric;
        v_asset text;
        v_counterparty text;
        v_balance numeric;
    BEGIN
        IF p_account IS NULL OR p_delta IS NULL OR p_type IS NULL OR p_event_id IS NULL
           OR p_active_only IS NULL THEN
            RAISE EXCEPTION 'ledger_apply_balance_change: every argument is required'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT e.account_id, e.amount, e.event_type, e.status INTO v_event
        FROM payment_events e WHERE e.event_id = p_event_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'ledger_apply_balance_change: event % does not exist', p_event_id
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- The posting is the event's own: its account, its type, its amount with the sign
        -- its type gives (a credit only for the credit types).
        v_expected := CASE WHEN p_type = ANY ({_array(CREDIT_TYPES)}) THEN v_event.amount
                           ELSE -v_event.amount END;
        IF v_event.account_id <> p_account OR v_event.event_type <> p_type
           OR v_event.amount <= 0 OR p_delta <> v_expected THEN
            RAISE EXCEPTION 'ledger_apply_balance_change: % % on account % is not event %',
                p_type, p_delta, p_account, p_event_id
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- Being posted: moved by the caller's transaction, under the event's posting claim.
        IF v_event.status NOT IN ('processing', 'confirmed') OR NOT EXISTS (
            SELECT 1 FROM processed_events p
            WHERE p.idempotency_key = ledger_posting_key(p_event_id)
              AND p.event_id = p_event_id AND p.outcome IN ('pending', 'success')) THEN
            RAISE EXCEPTION 'ledger_apply_balance_change: event % is not being posted (%)',
                p_event_id, v_event.status USING ERRCODE = 'invalid_parameter_value';
        END IF;

        -- The counterparty before the account's row lock (plain reads), as in 0029.
        SELECT a.asset INTO v_asset FROM accounts a WHERE a.id = p_account;
        v_counterparty := ledger_counterparty(p_event_id, p_type, v_asset);

        -- The guard keeps open payout holds whole: a debit never takes the balance below
        -- `held`. The row lock taken here is held until the caller commits.
        UPDATE accounts
        SET balance = balance + p_delta, updated_at = now()
        WHERE id = p_account
          AND balance + p_delta >= held
          AND (NOT p_active_only OR status = 'active')
        RETURNING balance INTO v_balance;
        IF NOT FOUND THEN
            RETURN NULL;  -- refused: nothing written, the caller decides
        END IF;
        INSERT INTO balance_events (account_id, amount, event_type, source_event_id,
                                    balance_after)
        VALUES (p_account, p_delta, p_type, p_event_id, v_balance);
        INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind)
        VALUES (p_event_id, v_counterparty, -p_delta, p_type);
        RETURN v_balance;
    END
    $$
    """,
    """
    CREATE OR REPLACE FUNCTION ledger_post_opening(p_account uuid, p_amount numeric)
    RETURNS numeric
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_transfer bigint;
        v_asset text;
        v_balance numeric;
    BEGIN
        IF p_account IS NULL OR p_amount IS NULL OR p_amount <= 0 THEN
            RAISE EXCEPTION 'an opening balance must be positive'
                USING ERRCODE = 'check_violation';
        END IF;
        INSERT INTO ledger_transfers (kind, reference) VALUES ('opening', p_account::text)
        RETURNING id INTO v_transfer;
        UPDATE accounts SET balance = balance + p_amount, initial_balance = p_amount,
                            updated_at = now()
        WHERE id = p_account
        RETURNING asset, balance INTO v_asset, v_balance;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'account % does not exist', p_account USING ERRCODE = 'no_data_found';
        END IF;
        INSERT INTO ledger_legs (transfer_id, account_id, amount, kind)
        VALUES (v_transfer, p_account, p_amount, 'opening');
        INSERT INTO ledger_legs (transfer_id, ledger_account, amount, kind)
        VALUES (v_transfer, ledger_account('opening', NULL, v_asset), -p_amount, 'opening');
        RETURN v_balance;
    END
    $$
    """,
    # A payout's hold (amount + fee at its maximum), or an operator's raise of its fee hold:
    # one guarded statement under the account's row lock, placed only if it fits.
    """
    CREATE FUNCTION ledger_place_hold(p_account uuid, p_amount numeric)
    RETURNS TABLE (balance numeric, held numeric)
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    #variable_conflict use_column
    BEGIN
        IF p_account IS NULL OR p_amount IS NULL OR p_amount <= 0 THEN
            RAISE EXCEPTION 'ledger_place_hold: a hold must be positive'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RETURN QUERY
        UPDATE accounts a SET held = a.held + p_amount, updated_at = now()
        WHERE a.id = p_account AND a.status = 'active' AND a.balance - a.held >= p_amount
        RETURNING a.balance, a.held;
    END
    $$
    """,
    # The release of a final payout's hold, exactly what it held (amount + fee hold).
    """
    CREATE FUNCTION ledger_release_payout_hold(p_payout uuid) RETURNS numeric
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_payout record;
        v_held numeric;
    BEGIN
        SELECT p.account_id, p.amount, p.fee_hold, p.status INTO v_payout
        FROM payouts p WHERE p.id = p_payout;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'ledger_release_payout_hold: payout % does not exist', p_payout
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_payout.status NOT IN ('confirmed', 'failed') THEN
            RAISE EXCEPTION 'ledger_release_payout_hold: payout % is % (not final)',
                p_payout, v_payout.status USING ERRCODE = 'invalid_parameter_value';
        END IF;
        UPDATE accounts SET held = held - (v_payout.amount + v_payout.fee_hold),
                            updated_at = now()
        WHERE id = v_payout.account_id
        RETURNING held INTO v_held;
        RETURN v_held;
    END
    $$
    """,
]

REVOKE_PUBLIC: list[str] = [
    f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC"
    for signature in (POSTING_KEY, POST_SUCCESS, APPLY, OPENING, PLACE_HOLD, RELEASE_HOLD)
]

GRANT_HOOK = f"""
    CREATE FUNCTION payflow_grant_extra_0032_definer_postings(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        -- The journal: read only; the posting functions write it.
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON public.balance_events,'
                       ' public.ledger_legs, public.ledger_transfers, public.ledger_accounts'
                       ' FROM %I', app);
        -- Balances and holds move only through the posting functions; the service still
        -- freezes and unfreezes.
        EXECUTE format('REVOKE UPDATE ON public.accounts FROM %I', app);
        EXECUTE format('REVOKE UPDATE (balance, held, initial_balance) ON public.accounts'
                       ' FROM %I', app);
        EXECUTE format('GRANT UPDATE (status, updated_at) ON public.accounts TO %I', app);
        -- A new account carries no money: balance, held and initial_balance take their
        -- default 0 (the service may not name them).
        EXECUTE format('REVOKE INSERT ON public.accounts FROM %I', app);
        EXECUTE format('GRANT INSERT (id, asset, status, created_at, updated_at, merchant_id,'
                       ' settlement) ON public.accounts TO %I', app);
        -- An opening balance is an operator's act (the migration login), never the service's.
        EXECUTE format('REVOKE EXECUTE ON FUNCTION public.{OPENING} FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.{POST_SUCCESS}, public.{APPLY},'
                       ' public.{PLACE_HOLD}, public.{RELEASE_HOLD}, public.{POSTING_KEY}'
                       ' TO %I', app);
    END
    $$
    """

# Roles the grant functions have served: any role but the owner (the table's owner, who
# is current_user only when the migration login is not a superuser) holding a privilege on
# `accounts`.
_SERVED = """
    SELECT DISTINCT g.grantee::name AS role
    FROM information_schema.role_table_grants g
    WHERE g.table_schema = 'public' AND g.table_name = 'accounts'
      AND g.grantee NOT IN (current_user, 'PUBLIC')
      AND g.grantee <> (SELECT t.tableowner FROM pg_catalog.pg_tables t
                        WHERE t.schemaname = 'public' AND t.tablename = 'accounts')
      AND EXISTS (SELECT 1 FROM pg_roles o WHERE o.rolname = g.grantee AND NOT o.rolsuper)
"""

APPLY_HOOK = f"""
    DO $$
    DECLARE
        v_role record;
    BEGIN
        -- Every hook in name order, this one last: an upgrade without `payflow migrate`'s
        -- grant step also narrows what the treasury and adjustment tables' hooks narrow.
        FOR v_role IN {_SERVED} LOOP
            PERFORM payflow_grant_hooks(v_role.role);
        END LOOP;
    END
    $$
"""

REGRANT = f"""
    DO $$
    DECLARE
        v_role record;
    BEGIN
        FOR v_role IN {_SERVED} LOOP
            PERFORM payflow_grant_service(v_role.role);
            PERFORM payflow_grant_hooks(v_role.role);
        END LOOP;
    END
    $$
"""

# Called by the service outside any other posting function, so they write as the owner
# too once the service role may not: a missing system account created empty (its kind and
# code checked by ledger_accounts' constraints), and the custody recon's movements between
# system accounts (treasury sweeps, fundings and the sweeps' gas only).
SYSTEM_ACCOUNT = "ledger_account(text, text, text)"
SYSTEM_TRANSFER = "ledger_post_system_transfer(text, text, text, text, numeric)"
SYSTEM_TRANSFER_KINDS = """
    CREATE OR REPLACE FUNCTION ledger_post_system_transfer(
        p_kind text, p_reference text, p_debit text, p_credit text, p_amount numeric
    ) RETURNS bigint
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_transfer bigint;
    BEGIN
        IF p_kind IS NULL OR p_kind NOT IN ('treasury_sweep', 'treasury_funding', 'sweep_gas')
        THEN
            RAISE EXCEPTION 'a system transfer is a treasury sweep, funding or sweep gas'
                USING ERRCODE = 'check_violation';
        END IF;
        IF p_amount IS NULL OR p_amount <= 0 THEN
            RAISE EXCEPTION 'a transfer amount must be positive' USING ERRCODE = 'check_violation';
        END IF;
        IF p_debit IS NULL OR p_credit IS NULL OR p_debit = p_credit THEN
            RAISE EXCEPTION 'a transfer needs two accounts' USING ERRCODE = 'check_violation';
        END IF;
        INSERT INTO ledger_transfers (kind, reference) VALUES (p_kind, p_reference)
        ON CONFLICT (kind, reference) DO NOTHING
        RETURNING id INTO v_transfer;
        IF v_transfer IS NULL THEN
            RETURN NULL;
        END IF;
        INSERT INTO ledger_legs (transfer_id, ledger_account, amount, kind)
        VALUES (v_transfer, p_debit, -p_amount, p_kind), (v_transfer, p_credit, p_amount, p_kind);
        RETURN v_transfer;
    END
    $$
"""

UPGRADE: list[str] = [
    *FUNCTIONS,
    f"ALTER FUNCTION {SYSTEM_ACCOUNT} SECURITY DEFINER",
    SYSTEM_TRANSFER_KINDS,
    *REVOKE_PUBLIC,
    GRANT_HOOK,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0032_definer_postings(name) FROM PUBLIC",
    APPLY_HOOK,
]


def _opening_0029() -> str:
    """0029's `CREATE FUNCTION ledger_post_opening` as a `CREATE OR REPLACE`."""
    head = "CREATE FUNCTION ledger_post_opening("
    bodies: list[str] = [s for s in _0029.ACCOUNT_FUNCTIONS if head in s]
    if len(bodies) != 1:
        raise RuntimeError("0029's ledger_post_opening is not the body this revision replaces")
    body: str = bodies[0]
    return body.replace(head, "CREATE OR REPLACE FUNCTION ledger_post_opening(")


def downgrade_statements() -> list[str]:
    """0029's functions as they were (SECURITY INVOKER), this revision's dropped, and the
    grant functions re-run for the roles they serve."""
    return [
        "DROP FUNCTION payflow_grant_extra_0032_definer_postings(name)",
        f"DROP FUNCTION {RELEASE_HOLD}",
        f"DROP FUNCTION {PLACE_HOLD}",
        f"DROP FUNCTION {APPLY}",
        _0029.POST_SUCCESS_BODY,
        # CREATE OR REPLACE keeps an existing function's attributes it does not name.
        f"ALTER FUNCTION {POST_SUCCESS} SECURITY INVOKER",
        _opening_0029(),
        f"ALTER FUNCTION {OPENING} SECURITY INVOKER",
        f"DROP FUNCTION {POSTING_KEY}",
        f"ALTER FUNCTION {SYSTEM_ACCOUNT} SECURITY INVOKER",
        _0030.SYSTEM_TRANSFER_BODY,
        f"ALTER FUNCTION {SYSTEM_TRANSFER} SECURITY INVOKER",
        REGRANT,
    ]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(downgrade_statements())
