"""One balance check per payment event's posting, by the database's own mechanisms: a
payment event's counterparty leg is checked by keys, its posting by one deferred trigger.

Until this revision both legs of a payment event's posting queued a deferred check; the
counterparty leg's check skipped itself when this transaction had inserted the customer
leg (recognised by `xmin`), so that a posting was summed once. From this revision:

* `ledger_legs_event_leg_unique`: an event has at most one counterparty leg (a unique
  partial index, which also serves the lookups `ledger_legs_event_idx` served);
* `ledger_legs_event_customer_fkey`: an event's counterparty leg names its customer leg,
  `(source_event_id, kind)` -> `balance_events (source_event_id, event_type)`, so no
  counterparty leg exists without the customer leg it balances (it replaces the foreign
  key to `payment_events`, which the customer leg's own key implies);
* the trigger `ledger_legs_balanced` fires only for a transfer's legs
  (`WHEN (NEW.transfer_id IS NOT NULL)`); a payment event's posting is summed once, by
  the customer leg's `balance_events_balanced`, at commit.

So a counterparty leg alone, a second one for a posted event, or one whose customer leg is
missing is refused at once by a key; a posting whose legs do not sum to zero (or name an
unknown account) is refused at commit, as before.

Revision ID: 0036_event_legs_checked_once
Revises: 0035_merchant_events
"""

from payflow.db.migrations.statements import execute_all

revision = "0036_event_legs_checked_once"
down_revision = "0035_merchant_events"
branch_labels = None
depends_on = None

_BODY = """
    CREATE OR REPLACE FUNCTION ledger_posting_balanced() RETURNS trigger
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
"""

UPGRADE: list[str] = [
    "CREATE UNIQUE INDEX ledger_legs_event_leg_unique ON ledger_legs (source_event_id)"
    " WHERE source_event_id IS NOT NULL",
    "DROP INDEX ledger_legs_event_idx",
    "ALTER TABLE ledger_legs ADD CONSTRAINT ledger_legs_event_customer_fkey"
    " FOREIGN KEY (source_event_id, kind)"
    " REFERENCES balance_events (source_event_id, event_type)",
    "ALTER TABLE ledger_legs DROP CONSTRAINT ledger_legs_source_event_id_fkey",
    "DROP TRIGGER ledger_legs_balanced ON ledger_legs",
    "CREATE CONSTRAINT TRIGGER ledger_legs_balanced AFTER INSERT ON ledger_legs"
    " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.transfer_id IS NOT NULL)"
    " EXECUTE FUNCTION ledger_posting_balanced()",
    _BODY,
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    import importlib

    _0029 = importlib.import_module("payflow.db.migrations.versions.0029_double_entry_books")
    head = "CREATE FUNCTION ledger_posting_balanced()"
    [body] = [s for s in _0029.ACCOUNT_FUNCTIONS if head in s]
    execute_all(
        [
            body.replace(head, "CREATE OR REPLACE FUNCTION ledger_posting_balanced()"),
            "DROP TRIGGER ledger_legs_balanced ON ledger_legs",
            "CREATE CONSTRAINT TRIGGER ledger_legs_balanced AFTER INSERT ON ledger_legs"
            " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW"
            " EXECUTE FUNCTION ledger_posting_balanced()",
            "ALTER TABLE ledger_legs ADD CONSTRAINT ledger_legs_source_event_id_fkey"
            " FOREIGN KEY (source_event_id) REFERENCES payment_events (event_id)",
            "ALTER TABLE ledger_legs DROP CONSTRAINT ledger_legs_event_customer_fkey",
            "CREATE INDEX ledger_legs_event_idx ON ledger_legs (source_event_id)"
            " WHERE source_event_id IS NOT NULL",
            "DROP INDEX ledger_legs_event_leg_unique",
        ]
    )
