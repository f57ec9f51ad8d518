"""Retention of the webhook attempt log (`webhook_attempt_log`, migration 0017).

The service role may only add and read attempt rows (0017's grant hook revokes UPDATE
and DELETE), so nothing removed them and the table grew without bound. Old rows now go
only through `cleanup_webhook_attempt_log(min_age_days, batch_size)`, a SECURITY DEFINER
function owned by the owner, with its search_path pinned, EXECUTE revoked from PUBLIC and
granted to the service role by this revision's grant hook. It deletes rows whose
`attempted_at` is older than `min_age_days` (clamped up to 1 day, so the service role can
never wipe recent evidence), oldest first, at most `batch_size` (clamped to [1, 10000])
rows locked with SKIP LOCKED, and returns how many it deleted. An index on `attempted_at`
keeps each batch an index range scan. The scheduler job `cleanup_webhook_attempt_log`
(`payflow/webhooks/attempts/retention.py`) calls it.

Revision ID: 0019_attempt_log_retention
Revises: 0018_webhook_chains
"""

from payflow.db.migrations.statements import execute_all

revision = "0019_attempt_log_retention"
down_revision = "0018_webhook_chains"
branch_labels = None
depends_on = None

# Smallest age, in days, at which an attempt row may be deleted; the function clamps any
# smaller argument (and NULL) up to it. Batches are clamped to [1, 10000].
MIN_ATTEMPT_AGE_DAYS = 1

UPGRADE: list[str] = [
    "CREATE INDEX webhook_attempt_log_attempted_idx ON webhook_attempt_log (attempted_at)",
    f"""
    CREATE FUNCTION cleanup_webhook_attempt_log(min_age_days integer, batch_size integer)
    RETURNS integer
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    DECLARE
        age_days integer := greatest(coalesce(min_age_days, {MIN_ATTEMPT_AGE_DAYS}),
                                     {MIN_ATTEMPT_AGE_DAYS});
        batch integer := least(greatest(coalesce(batch_size, 1000), 1), 10000);
        deleted integer;
    BEGIN
        WITH doomed AS (
            SELECT l.id
            FROM public.webhook_attempt_log l
            WHERE l.attempted_at
                  < pg_catalog.now() - pg_catalog.make_interval(days => age_days)
            ORDER BY l.attempted_at
            LIMIT batch
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM public.webhook_attempt_log l
        USING doomed d
        WHERE l.id = d.id;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        RETURN deleted;
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION cleanup_webhook_attempt_log(integer, integer) FROM PUBLIC",
    """
    CREATE FUNCTION payflow_grant_extra_0019_attempt_log_retention(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.cleanup_webhook_attempt_log(integer,'
                       ' integer) TO %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0019_attempt_log_retention(name) FROM PUBLIC",
]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_extra_0019_attempt_log_retention(name)",
    "DROP FUNCTION cleanup_webhook_attempt_log(integer, integer)",
    "DROP INDEX webhook_attempt_log_attempted_idx",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
