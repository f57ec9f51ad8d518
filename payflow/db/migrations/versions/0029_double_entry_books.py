"""Double-entry books: payflow's own accounts, a counterparty leg for every posting, and
PostgreSQL refusing at commit any posting whose legs do not sum to zero.

Until this revision `balance_events` was a single-entry journal: a deposit credited the
customer and nothing was debited anywhere. This revision adds:

* `ledger_accounts`, the chart of payflow's own accounts (`custody:<chain>:<asset>`,
  `gateway:<currency>`, `fees:<asset>`, `network_fees:<chain>:<asset>`,
  `reorg_loss:<asset>`, `opening:<asset>`, `adjustments:<asset>`), each with its kind and
  normal side. They keep NO running balance: their balance is the sum of their legs, so no
  posting takes a row lock every posting takes (a hot `gateway:USD` never serialises).
* `ledger_transfers`, postings that are not payment events (today only `opening`).
* `ledger_legs`, every leg that is not a payment event's leg on a customer account (those
  stay in `balance_events`, with their running `balance_after`): the system-account leg
  of each payment event, and both legs of a transfer. The journal is the union of the
  two tables (view `ledger_journal`); amounts are signed credit-positive (a credit to a
  customer account is +, the custody debit that balances it is -).
* `ledger_post_success` (0020) and the query `apply_balance_change` write the
  counterparty leg in the same statement as the customer leg (`ledger_counterparty`
  derives it from the event type); `ledger_post_opening` posts an opening transfer.
* Deferred constraint triggers on both tables: at commit every posting touched must sum
  to zero per asset, and every leg must name a known account, or the commit fails
  (check_violation, constraint `ledger_posting_balanced`), whoever sends the write.

Existing data converts in place: every `balance_events` row gets its counterparty leg,
every `initial_balance` becomes an opening transfer (opening:<asset> -> account). Then the
migration checks that every account's stored balance equals its new journal and that the
trial balance is zero per asset and per posting, and raises (rolling back) otherwise.

The downgrade drops what this revision added. Legs that the older schema can rebuild
(counterparty legs of payment events, one opening per account that `initial_balance`
still carries) are not a loss; a leg it cannot express is (a customer leg other than its
account's opening, a posting with no customer leg): then it refuses unless forced.

Revision ID: 0029_double_entry_books
Revises: 0028_transfer_mismatch
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0029_double_entry_books"
down_revision = "0028_transfer_mismatch"
branch_labels = None
depends_on = None

POST_SUCCESS = "ledger_post_success(text, text, text[], text[], text[], integer)"
FUNCTIONS = (
    "ledger_account(text, text, text)",
    "ledger_counterparty(text, text, text)",
    "ledger_post_opening(uuid, numeric)",
)

TABLES: list[str] = [
    """
    CREATE TABLE ledger_accounts (
        code text PRIMARY KEY,
        kind text NOT NULL,
        chain text,
        asset text NOT NULL REFERENCES assets (code),
        normal_side text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT ledger_accounts_kind_valid CHECK (kind IN
            ('custody', 'gateway', 'fees', 'network_fees', 'reorg_loss', 'opening',
             'adjustments')),
        CONSTRAINT ledger_accounts_chain_format CHECK (chain ~ '^([A-Z0-9_]{2,40}|external)$'),
        CONSTRAINT ledger_accounts_chain_where_needed
            CHECK ((kind IN ('custody', 'network_fees')) = (chain IS NOT NULL)),
        CONSTRAINT ledger_accounts_code_format
            CHECK (code = kind || ':' || coalesce(chain || ':', '') || asset),
        CONSTRAINT ledger_accounts_normal_side_valid
            CHECK (normal_side = CASE WHEN kind = 'fees' THEN 'credit' ELSE 'debit' END)
    )
    """,
    """
    CREATE TABLE ledger_transfers (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        kind text NOT NULL,
        reference text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT ledger_transfers_kind_valid CHECK (kind IN ('opening')),
        CONSTRAINT ledger_transfers_reference_length
            CHECK (length(reference) BETWEEN 1 AND 200),
        CONSTRAINT ledger_transfers_reference_unique UNIQUE (kind, reference)
    )
    """,
    # No foreign key on ledger_account: its check would take FOR KEY SHARE on the system
    # account's row in every posting (one row every payment shares); the balance trigger
    # checks the code exists with a plain read instead, and ledger_accounts rows are
    # never deleted.
    """
    CREATE TABLE ledger_legs (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        source_event_id text REFERENCES payment_events (event_id),
        transfer_id bigint REFERENCES ledger_transfers (id),
        account_id uuid REFERENCES accounts (id),
        ledger_account text,
        -- As wide as a balance: an opening may be any balance (a payment leg fits 38 digits).
        amount numeric(78,18) NOT NULL,
        kind text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT ledger_legs_one_posting CHECK (num_nonnulls(source_event_id, transfer_id) = 1),
        CONSTRAINT ledger_legs_one_account CHECK (num_nonnulls(account_id, ledger_account) = 1),
        CONSTRAINT ledger_legs_amount_non_zero CHECK (amount <> 0)
    )
    """,
    "CREATE INDEX ledger_legs_event_idx ON ledger_legs (source_event_id)"
    " WHERE source_event_id IS NOT NULL",
    "CREATE INDEX ledger_legs_transfer_idx ON ledger_legs (transfer_id)"
    " WHERE transfer_id IS NOT NULL",
    "CREATE INDEX ledger_legs_ledger_account_idx ON ledger_legs (ledger_account, id)"
    " WHERE ledger_account IS NOT NULL",
    "CREATE INDEX ledger_legs_account_idx ON ledger_legs (account_id, id)"
    " WHERE account_id IS NOT NULL",
    """
    CREATE FUNCTION ledger_append_only() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END
    $$
    """,
    "CREATE TRIGGER ledger_legs_no_update_delete BEFORE UPDATE OR DELETE ON ledger_legs"
    " FOR EACH ROW EXECUTE FUNCTION ledger_append_only()",
    "CREATE TRIGGER ledger_legs_no_truncate BEFORE TRUNCATE ON ledger_legs"
    " FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()",
    "CREATE TRIGGER ledger_transfers_no_update_delete BEFORE UPDATE OR DELETE"
    " ON ledger_transfers FOR EACH ROW EXECUTE FUNCTION ledger_append_only()",
    "CREATE TRIGGER ledger_transfers_no_truncate BEFORE TRUNCATE ON ledger_transfers"
    " FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()",
    """
    CREATE VIEW ledger_journal AS
    SELECT b.source_event_id, NULL::bigint AS transfer_id, b.account_id,
           NULL::text AS ledger_account, a.asset, b.amount, b.event_type AS kind, b.created_at
    FROM balance_events b JOIN accounts a ON a.id = b.account_id
    UNION ALL
    SELECT l.source_event_id, l.transfer_id, l.account_id, l.ledger_account,
           coalesce(s.asset, c.asset) AS asset, l.amount, l.kind, l.created_at
    FROM ledger_legs l
    LEFT JOIN ledger_accounts s ON s.code = l.ledger_account
    LEFT JOIN accounts c ON c.id = l.account_id
    """,
]

ACCOUNT_FUNCTIONS: list[str] = [
    # The code of a system account, created when missing (a new asset, chain or token:
    # the first posting that needs it creates it; concurrent first postings meet on the
    # primary key and both use the one row).
    """
    CREATE FUNCTION ledger_account(p_kind text, p_chain text, p_asset text) RETURNS text
    LANGUAGE plpgsql
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_code text := p_kind || ':' || coalesce(p_chain || ':', '') || p_asset;
    BEGIN
        PERFORM 1 FROM ledger_accounts WHERE code = v_code;
        IF NOT FOUND THEN
            INSERT INTO ledger_accounts (code, kind, chain, asset, normal_side)
            VALUES (v_code, p_kind, p_chain, p_asset,
                    CASE WHEN p_kind = 'fees' THEN 'credit' ELSE 'debit' END)
            ON CONFLICT (code) DO NOTHING;
        END IF;
        RETURN v_code;
    END
    $$
    """,
    # The system account on the other side of a payment event's customer leg. A custody
    # account's chain is the chain of the registry row the event id names (a chain
    # deposit `chain:<transfer id>[~n]`, its reversal `reorg:<transfer id>[~n]`, a payout
    # `po:<uuid>`); an event with none (a provider-reported deposit or withdrawal on the
    # ledger-only path) uses `custody:external:<asset>`.
    """
    CREATE FUNCTION ledger_counterparty(p_event_id text, p_type text, p_asset text)
    RETURNS text
    LANGUAGE plpgsql
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_chain text;
    BEGIN
        CASE p_type
        WHEN 'payment_credit' THEN
            RETURN ledger_account('gateway', NULL, p_asset);
        WHEN 'withdrawal_fee' THEN
            RETURN ledger_account('fees', NULL, p_asset);
        WHEN 'deposit', 'airdrop', 'deposit_reversal' THEN
            IF p_event_id LIKE 'chain:%' OR p_event_id LIKE 'reorg:%' THEN
                SELECT d.chain INTO v_chain FROM chain_deposits d
                WHERE d.transfer_id = split_part(substr(p_event_id, 7), '~', 1);
            END IF;
        WHEN 'withdrawal' THEN
            IF p_event_id ~ '^po:[0-9a-f-]{36}$' THEN
                SELECT p.chain INTO v_chain FROM payouts p
                WHERE p.id = substr(p_event_id, 4)::uuid;
            END IF;
        ELSE
            RAISE EXCEPTION 'event type % has no counterparty account', p_type
                USING ERRCODE = 'check_violation';
        END CASE;
        RETURN ledger_account('custody', coalesce(v_chain, 'external'), p_asset);
    END
    $$
    """,
    # At commit (deferred), for the posting of the inserted leg: every leg names a known
    # account and the legs sum to zero per asset, or check_violation.
    """
    CREATE FUNCTION ledger_posting_balanced() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_event text := NEW.source_event_id;
        v_transfer bigint;
        v_asset text;
        v_total numeric;
    BEGIN
        IF TG_TABLE_NAME = 'ledger_legs' THEN
            v_transfer := NEW.transfer_id;
            -- One check per posting: the counterparty leg of a payment event whose
            -- customer leg this very transaction inserted (xmin is ours, not a
            -- subtransaction's) is checked by that leg's own deferred check, which sums
            -- the whole posting at commit. Any other leg is checked here.
            IF v_transfer IS NULL AND EXISTS (
                SELECT 1 FROM balance_events b
                WHERE b.source_event_id = v_event
                  AND b.xmin = pg_catalog.pg_current_xact_id()::xid
            ) THEN
                RETURN NULL;
            END IF;
        END IF;
        -- Each leg's asset by a key lookup (a subquery per leg, never a join the planner
        -- could hash over the whole accounts table while its statistics are empty).
        IF v_transfer IS NULL THEN
            SELECT g.asset, g.total INTO v_asset, v_total FROM (
                SELECT j.asset, sum(j.amount) AS total FROM (
                    SELECT (SELECT a.asset FROM accounts a WHERE a.id = b.account_id) AS asset,
                           b.amount
                    FROM balance_events b WHERE b.source_event_id = v_event
                    UNION ALL
                    SELECT coalesce(
                               (SELECT s.asset FROM ledger_accounts s
                                WHERE s.code = l.ledger_account),
                               (SELECT c.asset FROM accounts c WHERE c.id = l.account_id)),
                           l.amount
                    FROM ledger_legs l WHERE l.source_event_id = v_event
                ) j GROUP BY j.asset
            ) g WHERE g.asset IS NULL OR g.total <> 0 ORDER BY g.asset NULLS FIRST LIMIT 1;
        ELSE
            SELECT g.asset, g.total INTO v_asset, v_total FROM (
                SELECT j.asset, sum(j.amount) AS total FROM (
                    SELECT coalesce(
                               (SELECT s.asset FROM ledger_accounts s
                                WHERE s.code = l.ledger_account),
                               (SELECT c.asset FROM accounts c WHERE c.id = l.account_id))
                               AS asset,
                           l.amount
                    FROM ledger_legs l WHERE l.transfer_id = v_transfer
                ) j GROUP BY j.asset
            ) g WHERE g.asset IS NULL OR g.total <> 0 ORDER BY g.asset NULLS FIRST LIMIT 1;
        END IF;
        IF FOUND THEN
            RAISE EXCEPTION 'unbalanced posting %: %',
                coalesce('event ' || v_event, 'transfer ' || v_transfer),
                CASE WHEN v_asset IS NULL THEN 'a leg names an unknown account'
                     ELSE format('its %s legs sum to %s, not 0', v_asset, v_total) END
                USING ERRCODE = 'check_violation', CONSTRAINT = 'ledger_posting_balanced',
                      TABLE = TG_TABLE_NAME;
        END IF;
        RETURN NULL;
    END
    $$
    """,
    # An opening balance as a transfer opening:<asset> -> account, once per account.
    """
    CREATE FUNCTION ledger_post_opening(p_account uuid, p_amount numeric) RETURNS numeric
    LANGUAGE plpgsql
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_transfer bigint;
        v_asset text;
        v_balance numeric;
    BEGIN
        IF p_amount IS NULL OR p_amount <= 0 THEN
            RAISE EXCEPTION 'an opening balance must be positive'
                USING ERRCODE = 'check_violation';
        END IF;
        INSERT INTO ledger_transfers (kind, reference) VALUES ('opening', p_account::text)
        RETURNING id INTO v_transfer;
        UPDATE accounts SET balance = balance + p_amount, updated_at = now()
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
]

# ledger_post_success as 0020 wrote it, but for the counterparty leg (and the asset it needs,
# read before the account's row is locked, so the lock is not held across the lookup).
POST_SUCCESS_BODY = """
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
    SECURITY INVOKER
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
        INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind)
        VALUES (p_event_id, v_counterparty, -v_delta, v_type);
        RETURN v_balance;
    END
    $$
    """

# The chart for what is registered today (later ones are created by their first posting).
SEED: list[str] = [
    """
    INSERT INTO ledger_accounts (code, kind, chain, asset, normal_side)
    SELECT k.kind || ':' || a.code, k.kind, NULL, a.code, k.side
    FROM assets a,
         (VALUES ('fees', 'credit'), ('reorg_loss', 'debit'), ('opening', 'debit'),
                 ('adjustments', 'debit')) AS k(kind, side)
    UNION ALL
    SELECT 'custody:external:' || a.code, 'custody', 'external', a.code, 'debit' FROM assets a
    UNION ALL
    SELECT 'custody:' || c.chain || ':' || c.native_asset, 'custody', c.chain, c.native_asset,
           'debit'
    FROM chains c JOIN assets a ON a.code = c.native_asset
    UNION ALL
    SELECT 'network_fees:' || c.chain || ':' || c.native_asset, 'network_fees', c.chain,
           c.native_asset, 'debit'
    FROM chains c JOIN assets a ON a.code = c.native_asset
    UNION ALL
    SELECT DISTINCT 'custody:' || t.chain || ':' || t.asset, 'custody', t.chain, t.asset, 'debit'
    FROM chain_tokens t JOIN assets a ON a.code = t.asset
    UNION ALL
    SELECT 'gateway:' || a.code, 'gateway', NULL, a.code, 'debit' FROM assets a
    WHERE NOT EXISTS (SELECT 1 FROM chains c WHERE c.native_asset = a.code)
      AND NOT EXISTS (SELECT 1 FROM chain_tokens t WHERE t.asset = a.code)
    ON CONFLICT (code) DO NOTHING
    """,
]

CONVERT: list[str] = [
    # Every existing journal row gets its counterparty leg, at the row's own time.
    """
    INSERT INTO ledger_legs (source_event_id, ledger_account, amount, kind, created_at)
    SELECT b.source_event_id, ledger_counterparty(b.source_event_id, b.event_type, a.asset),
           -b.amount, b.event_type, b.created_at
    FROM balance_events b JOIN accounts a ON a.id = b.account_id
    ORDER BY b.id
    """,
    # Every initial balance becomes an opening transfer, at the account's creation.
    """
    INSERT INTO ledger_transfers (kind, reference, created_at)
    SELECT 'opening', a.id::text, a.created_at FROM accounts a WHERE a.initial_balance > 0
    ORDER BY a.created_at, a.id
    """,
    """
    INSERT INTO ledger_legs (transfer_id, account_id, ledger_account, amount, kind, created_at)
    SELECT t.id, leg.account_id, leg.ledger_account, leg.amount, 'opening', t.created_at
    FROM ledger_transfers t
    JOIN accounts a ON a.id = t.reference::uuid
    CROSS JOIN LATERAL (VALUES
        (a.id, NULL::text, a.initial_balance),
        (NULL::uuid, ledger_account('opening', NULL, a.asset), -a.initial_balance)
    ) AS leg(account_id, ledger_account, amount)
    WHERE t.kind = 'opening'
    ORDER BY t.id, leg.amount DESC
    """,
    # The proof, or the whole revision rolls back.
    """
    DO $$
    DECLARE
        v record;
    BEGIN
        SELECT a.id, a.balance, coalesce(j.total, 0) AS total INTO v
        FROM accounts a
        LEFT JOIN (SELECT account_id, sum(amount) AS total FROM ledger_journal
                   WHERE account_id IS NOT NULL GROUP BY account_id) j ON j.account_id = a.id
        WHERE a.balance <> coalesce(j.total, 0)
        LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'double-entry conversion refused: account % holds % but its'
                ' journal (opening balance and ledger rows) sums to %', v.id, v.balance, v.total
                USING ERRCODE = 'check_violation';
        END IF;
        SELECT asset, sum(amount) AS total INTO v FROM ledger_journal
        GROUP BY asset HAVING asset IS NULL OR sum(amount) <> 0 LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'double-entry conversion refused: the trial balance of % is %',
                coalesce(v.asset, 'an unknown account'), v.total
                USING ERRCODE = 'check_violation';
        END IF;
        SELECT coalesce(source_event_id, transfer_id::text) AS posting, sum(amount) AS total
        INTO v FROM ledger_journal
        GROUP BY source_event_id, transfer_id, asset HAVING sum(amount) <> 0 LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'double-entry conversion refused: posting % sums to %',
                v.posting, v.total USING ERRCODE = 'check_violation';
        END IF;
    END
    $$
    """,
]

TRIGGERS: list[str] = [
    "CREATE CONSTRAINT TRIGGER balance_events_balanced AFTER INSERT ON balance_events"
    " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_posting_balanced()",
    "CREATE CONSTRAINT TRIGGER ledger_legs_balanced AFTER INSERT ON ledger_legs"
    " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_posting_balanced()",
]

GRANTS: list[str] = [
    *(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC" for signature in FUNCTIONS),
    """
    CREATE FUNCTION payflow_grant_extra_0029_double_entry_books(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        -- Append-only books; a system account is created, never changed.
        EXECUTE format('REVOKE UPDATE, DELETE ON public.ledger_legs, public.ledger_transfers,'
                       ' public.ledger_accounts FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.ledger_account(text, text, text),'
                       ' public.ledger_counterparty(text, text, text),'
                       ' public.ledger_post_opening(uuid, numeric) TO %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0029_double_entry_books(name) FROM PUBLIC",
]

UPGRADE: list[str] = [
    *TABLES,
    *ACCOUNT_FUNCTIONS,
    POST_SUCCESS_BODY,
    *SEED,
    *CONVERT,
    *TRIGGERS,
    *GRANTS,
]


def _post_success_0020() -> str:
    """0020's `CREATE FUNCTION ledger_post_success` as a `CREATE OR REPLACE`."""
    import importlib

    body: str = importlib.import_module(
        "payflow.db.migrations.versions.0020_one_statement_posting"
    ).UPGRADE[0]
    head = "CREATE FUNCTION ledger_post_success("
    if body.count(head) != 1:
        raise RuntimeError("0020's ledger_post_success is not the body this revision replaces")
    return body.replace(head, "CREATE OR REPLACE FUNCTION ledger_post_success(")


DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_extra_0029_double_entry_books(name)",
    "DROP TRIGGER ledger_legs_balanced ON ledger_legs",
    "DROP TRIGGER balance_events_balanced ON balance_events",
    "DROP VIEW ledger_journal",
    "DROP TABLE ledger_legs",
    "DROP TABLE ledger_transfers",
    "DROP TABLE ledger_accounts",
    "DROP FUNCTION ledger_post_opening(uuid, numeric)",
    "DROP FUNCTION ledger_posting_balanced()",
    "DROP FUNCTION ledger_counterparty(text, text, text)",
    "DROP FUNCTION ledger_account(text, text, text)",
    "DROP FUNCTION ledger_append_only()",
]


def upgrade() -> None:
    execute_all(UPGRADE)


# Legs the older schema cannot express (it knows balance = initial_balance + its
# balance_events): a leg on a customer account other than its single opening that
# initial_balance carries, or a posting without any customer leg (a movement between
# payflow's own accounts). Counterparty legs of payment events are rebuilt by upgrading.
LOSES_DATA = """
SELECT EXISTS (
    SELECT 1 FROM accounts a
    JOIN (SELECT l.account_id, sum(l.amount) AS total, count(*) AS legs FROM ledger_legs l
          WHERE l.account_id IS NOT NULL GROUP BY l.account_id) c ON c.account_id = a.id
    WHERE c.total <> a.initial_balance OR c.legs > 1
       OR EXISTS (SELECT 1 FROM ledger_legs l WHERE l.account_id = a.id
                  AND (l.kind <> 'opening' OR l.transfer_id IS NULL))
) OR EXISTS (
    SELECT 1 FROM ledger_transfers t
    WHERE NOT EXISTS (SELECT 1 FROM ledger_legs l
                      WHERE l.transfer_id = t.id AND l.account_id IS NOT NULL)
) OR EXISTS (
    SELECT 1 FROM ledger_legs l
    WHERE l.source_event_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM balance_events b WHERE b.source_event_id = l.source_event_id)
)
"""


def downgrade() -> None:
    refuse_data_loss(LOSES_DATA, "ledger legs the older single-entry journal cannot express")
    execute_all([_post_success_0020(), *DOWNGRADE])
