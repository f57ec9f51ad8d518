"""Console: server-side sessions and the webhook attempt log.

`console_sessions` holds one row per signed-in browser, keyed by the SHA-256 of the
session token (the cookie carries the token, signed; the table never holds it), with
its CSRF token, expiry and revocation: sign-out sets `revoked_at`, so a copied cookie
stops working at once. `webhook_attempt_log` records each webhook POST with the HTTP
status the merchant answered (NULL: no HTTP answer, the error says why); the service
may only add and read rows (UPDATE and DELETE revoked in the grant hook).

Revision ID: 0017_console
Revises: 0016_webhook_leases
"""

from payflow.db.migrations.statements import execute_all

revision = "0017_console"
down_revision = "0016_webhook_leases"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    """
    CREATE TABLE console_sessions (
        token_sha256 TEXT PRIMARY KEY
            CONSTRAINT console_sessions_token_hex CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
        merchant_id UUID NOT NULL REFERENCES merchants (id) ON DELETE CASCADE,
        csrf_token TEXT NOT NULL
            CONSTRAINT console_sessions_csrf_length CHECK (length(csrf_token) >= 32),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        expires_at TIMESTAMPTZ NOT NULL,
        revoked_at TIMESTAMPTZ,
        CONSTRAINT console_sessions_expiry_after_creation CHECK (expires_at > created_at)
    )
    """,
    "CREATE INDEX console_sessions_expires_idx ON console_sessions (expires_at)",
    """
    CREATE TABLE webhook_attempt_log (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        payment_id UUID NOT NULL REFERENCES payments (id),
        attempt INTEGER NOT NULL
            CONSTRAINT webhook_attempt_log_attempt_positive CHECK (attempt >= 1),
        http_status SMALLINT
            CONSTRAINT webhook_attempt_log_http_status_range
            CHECK (http_status IS NULL OR http_status BETWEEN 100 AND 599),
        error TEXT CONSTRAINT webhook_attempt_log_error_length CHECK (length(error) <= 2000),
        attempted_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
    )
    """,
    "CREATE INDEX webhook_attempt_log_payment_idx ON webhook_attempt_log (payment_id, id)",
    # The console lists payments and events newest first across merchants, and charts the
    # last hour: ordered btrees for the lists, BRIN (tiny, cheap to maintain) for outcome times.
    "CREATE INDEX payments_created_idx ON payments (created_at, id)",
    "CREATE INDEX payment_events_created_idx ON payment_events (created_at, event_id)",
    "CREATE INDEX payments_processed_brin ON payments USING brin (processed_at)",
    "CREATE INDEX payment_events_updated_brin ON payment_events USING brin (updated_at)",
    """
    CREATE FUNCTION payflow_grant_extra_0017_console(app name) RETURNS void
    LANGUAGE plpgsql SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        EXECUTE format('REVOKE UPDATE, DELETE ON public.webhook_attempt_log FROM %I', app);
    END
    $$
    """,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0017_console(name) FROM PUBLIC",
]

DOWNGRADE: list[str] = [
    "DROP FUNCTION payflow_grant_extra_0017_console(name)",
    "DROP INDEX payment_events_updated_brin",
    "DROP INDEX payments_processed_brin",
    "DROP INDEX payment_events_created_idx",
    "DROP INDEX payments_created_idx",
    "DROP TABLE webhook_attempt_log",
    "DROP TABLE console_sessions",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
