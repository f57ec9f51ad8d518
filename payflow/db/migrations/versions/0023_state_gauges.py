"""`state_gauges`: the state gauges' snapshot, computed once per refresh period for the
whole deployment instead of once per process.

Every payflow process serves the state gauges (`payflow.gauges.StateRefresher`), and
each used to compute them itself every `METRICS_REFRESH_S`: per-status counts of
`payments` and `payment_events` are whole-table scans, so with the roles split over N
processes the database paid N scans per period. On a ledger of 100,000 payments one
snapshot took 135-145 ms; `payflow bench e2e` on that filled ledger showed it as the
fourth most expensive statement, ahead of every webhook statement.

The one row here holds the last snapshot (`state`, the JSON of the old `metrics_state`
answer) and when it was taken. A refresh reads it; only when it is older than half of
`METRICS_REFRESH_S` (or dated in the future) does one process, the one that wins a
transaction-scoped advisory lock, compute a new snapshot and store it in the same
statement (`metrics_state` in `payflow/queries.sql`). The others keep serving the
previous snapshot meanwhile.

The service role reads, inserts and updates it (the schema-wide grants of 0009); this
revision's grant hook revokes DELETE, which nothing needs.

Revision ID: 0023_state_gauges
Revises: 0022_finalize_posts_credit
"""

from payflow.db.migrations.statements import execute_all

revision = "0023_state_gauges"
down_revision = "0022_finalize_posts_credit"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    """
    CREATE TABLE state_gauges (
        id smallint PRIMARY KEY DEFAULT 1 CONSTRAINT state_gauges_one_row CHECK (id = 1),
        computed_at timestamptz NOT NULL,
        state jsonb NOT NULL
    )
    """,
    """
    CREATE FUNCTION payflow_grant_extra_0023_state_gauges(app name) RETURNS void
    LANGUAGE plpgsql SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        EXECUTE format('REVOKE DELETE, TRUNCATE ON public.state_gauges FROM %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0023_state_gauges(name) FROM PUBLIC",
]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_extra_0023_state_gauges(name)",
    "DROP TABLE state_gauges",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
