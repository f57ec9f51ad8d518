"""The posting key is computed inline: `ledger_posting_key` becomes a SQL function the
planner can inline into its callers' expressions.

0032 declared it `IMMUTABLE` with a pinned `search_path`. Either attribute forbids
inlining: a `SET` clause always does, and an IMMUTABLE function whose body calls a STABLE
function (`convert_to`) is never inlined. A plpgsql caller in its own transaction (every
one-statement posting is one) then sets up a SQL function call each time, which cost about
0.15 ms a posting, one sixth of the success path. From this revision it is `STABLE STRICT`
without `SET`, and its body names every function and operator by its `pg_catalog` name, so
what it computes does not depend on the caller's search path.

The key is unchanged (the same bytes, `payflow.idempotency.idempotency_key`); the unit
test of the Python and SQL keys keeps them equal.

Revision ID: 0033_inline_posting_key
Revises: 0032_definer_postings
"""

from payflow.db.migrations.statements import execute_all

revision = "0033_inline_posting_key"
down_revision = "0032_definer_postings"
branch_labels = None
depends_on = None

_CAT = "OPERATOR(pg_catalog.||)"

INLINABLE = f"""
    CREATE OR REPLACE FUNCTION ledger_posting_key(p_event_id text) RETURNS text
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    AS $$
        SELECT pg_catalog.encode(pg_catalog.sha256(
            pg_catalog.int8send(2) {_CAT} pg_catalog.int8send(11)
            {_CAT} pg_catalog.convert_to('ledger.post', 'UTF8')
            {_CAT} pg_catalog.int8send(pg_catalog.octet_length(
                   pg_catalog.convert_to(p_event_id, 'UTF8')))
            {_CAT} pg_catalog.convert_to(p_event_id, 'UTF8')), 'hex')
    $$
"""

PINNED = """
    CREATE OR REPLACE FUNCTION ledger_posting_key(p_event_id text) RETURNS text
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
"""


def upgrade() -> None:
    # CREATE OR REPLACE assigns every attribute it does not name its default: no SET.
    execute_all([INLINABLE, "ALTER FUNCTION ledger_posting_key(text) RESET ALL"])


def downgrade() -> None:
    execute_all([PINNED])
