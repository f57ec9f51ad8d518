"""Least privilege: owner and service roles.

Migrations run as the owner role (`payflow.db.migrate` sets the role; the owner owns
every table, sequence and function). The service logs in as a separate APP role whose
privileges come from ONE function defined here, `payflow_grant_service(app)`, which
`payflow migrate` calls after every upgrade (so tables added by any migration are
covered). It grants DML on every table in `public`, then takes back what the code does
not need; the table of privileges is in docs/architecture.md ("Database roles").

`processed_events` claims can only be removed through `cleanup_processed_events()`, a
SECURITY DEFINER function owned by the owner, with its search_path pinned.

Revision ID: 0009_roles
Revises: 0008_money_limits
"""

from payflow.db.migrations.statements import execute_all

revision = "0009_roles"
down_revision = "0008_money_limits"
branch_labels = None
depends_on = None

# Smallest age, in days, at which a posting claim may be deleted; the function clamps
# any smaller argument up to it. Batches are clamped to [1, 10000].
MIN_CLAIM_AGE_DAYS = 14

UPGRADE: list[str] = [
    f"""
    CREATE FUNCTION cleanup_processed_events(min_age_days integer, batch_size integer)
    RETURNS integer
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    DECLARE
        age_days integer := greatest(coalesce(min_age_days, {MIN_CLAIM_AGE_DAYS}),
                                     {MIN_CLAIM_AGE_DAYS});
        batch integer := least(greatest(coalesce(batch_size, 1000), 1), 10000);
        deleted integer;
    BEGIN
        -- Only terminal outcomes of terminal (or vanished) events, old enough that no
        -- delivery of them can still be in flight; never a 'pending' claim.
        WITH doomed AS (
            SELECT p.idempotency_key
            FROM public.processed_events p
            WHERE p.outcome <> 'pending'
              AND p.created_at < pg_catalog.now() - pg_catalog.make_interval(days => age_days)
              AND NOT EXISTS (
                  SELECT 1 FROM public.payment_events e
                  WHERE e.event_id = p.event_id AND e.status NOT IN ('confirmed', 'failed')
              )
            ORDER BY p.created_at
            LIMIT batch
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM public.processed_events p
        USING doomed d
        WHERE p.idempotency_key = d.idempotency_key;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        RETURN deleted;
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION cleanup_processed_events(integer, integer) FROM PUBLIC",
    """
    CREATE FUNCTION payflow_grant_service(app name) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        IF app IS NULL OR app = current_user THEN
            RAISE EXCEPTION 'the service role must be a role other than the owner %',
                current_user;
        END IF;
        -- Start from nothing, so a run is idempotent and removes what is no longer granted.
        EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA public FROM %I', app);
        EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM %I', app);
        EXECUTE format('GRANT USAGE ON SCHEMA public TO %I', app);
        -- Every table (also those added by later migrations): DML, never TRUNCATE.
        EXECUTE format(
            'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO %I', app);
        EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO %I', app);
        -- Then take back what the code never does. The append-only ledger: read, append.
        EXECUTE format('REVOKE UPDATE, DELETE ON public.balance_events FROM %I', app);
        -- Posting claims: insert, and set the outcome; removal only via the cleanup function.
        EXECUTE format('REVOKE UPDATE, DELETE ON public.processed_events FROM %I', app);
        EXECUTE format('GRANT UPDATE (outcome) ON public.processed_events TO %I', app);
        -- Accounts: balance and status move; the opening balance (which reconciliation
        -- adds to the ledger sum), the asset and the owner never do.
        EXECUTE format('REVOKE UPDATE ON public.accounts FROM %I', app);
        EXECUTE format('GRANT UPDATE (balance, status, updated_at) ON public.accounts TO %I', app);
        -- Reference data and the migration history: read only / nothing.
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON public.assets FROM %I', app);
        EXECUTE format('REVOKE ALL ON public.alembic_version FROM %I', app);
        -- Registries decide which asset and how much: operators change them with the
        -- migration login (`payflow tokens add`, `payflow assets set-limit`), never the service.
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON public.chains, public.chain_tokens'
                       ' FROM %I', app);
        -- Evidence: kept raw deliveries and charge attempts are appended and updated only.
        EXECUTE format('REVOKE UPDATE, DELETE ON public.provider_deliveries FROM %I', app);
        EXECUTE format('REVOKE DELETE ON public.charge_attempts FROM %I', app);
        -- What an event or a payment moves (amount, account, merchant, currency, type, id)
        -- is written once at insert: the service may update only their lifecycle columns.
        EXECUTE format('REVOKE UPDATE ON public.payment_events FROM %I', app);
        EXECUTE format('GRANT UPDATE (status, retry_count, last_error, updated_at)'
                       ' ON public.payment_events TO %I', app);
        EXECUTE format('REVOKE UPDATE ON public.payments FROM %I', app);
        EXECUTE format('GRANT UPDATE (status, processed_at, webhook_attempts,'
                       ' webhook_delivered_at, webhook_dead_at, payment_sweeps,'
                       ' payment_swept_at, webhook_sweeps, webhook_swept_at)'
                       ' ON public.payments TO %I', app);
        -- Operations' records (migrations 0010, 0011), when present: alerts are resolved,
        -- never deleted.
        IF to_regclass('public.alerts') IS NOT NULL THEN
            EXECUTE format('REVOKE DELETE ON public.alerts FROM %I', app);
        END IF;
        -- Rows that are never deleted by the service.
        EXECUTE format('REVOKE DELETE ON public.accounts, public.payment_events,'
                       ' public.payments, public.dead_letter_queue,'
                       ' public.unmatched_provider_events FROM %I', app);
        EXECUTE format('REVOKE UPDATE, DELETE ON public.merchants,'
                       ' public.deposit_addresses FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.cleanup_processed_events(integer,'
                       ' integer) TO %I', app);
        -- Tables and sequences the owner creates later start with the same base grant.
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT,'
                       ' UPDATE, DELETE ON TABLES TO %I', app);
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON'
                       ' SEQUENCES TO %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_service(name) FROM PUBLIC",
]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_service(name)",
    "DROP FUNCTION cleanup_processed_events(integer, integer)",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
