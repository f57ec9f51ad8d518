"""Grant hooks: later migrations add their own service-role privileges.

`payflow_grant_service(app)` (0009) starts from nothing and grants the service role its
privileges. Tables and columns added after 0009 need their own narrowing (a column-level
UPDATE grant, a REVOKE DELETE), and several migrations must be able to add theirs
without rewriting one shared function. From this revision on, `payflow migrate` follows
`payflow_grant_service(app)` with `payflow_grant_hooks(app)`, which calls every
`payflow_grant_extra_<revision>(app name)` function that exists, in name order; a
migration that owns a table creates its own hook (and drops it on downgrade).

Revision ID: 0012_grant_hooks
Revises: 0011_alerts
"""

from payflow.db.migrations.statements import execute_all

revision = "0012_grant_hooks"
down_revision = "0011_alerts"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    """
    CREATE FUNCTION payflow_grant_hooks(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
    DECLARE
        hook text;
    BEGIN
        FOR hook IN
            SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'public' AND p.proname LIKE 'payflow\\_grant\\_extra\\_%'
            ORDER BY p.proname
        LOOP
            EXECUTE format('SELECT public.%I($1)', hook) USING app;
        END LOOP;
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_hooks(name) FROM PUBLIC",
]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_hooks(name)",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
