"""Webhook endpoints per merchant: every merchant event is delivered to each enabled
endpoint that wants its type, with a delivery log, redelivery and secret rotation.

* `webhook_endpoints`: a merchant's URL, the event types it wants (`{*}` for all), its
  secret (and the previous one while a rotation's overlap runs), enabled or not (and why:
  disabled by the merchant, or by the scheduler after `WEBHOOK_ENDPOINT_DISABLE_AFTER_DAYS`
  of failures only, `failing_since`).
* `webhook_deliveries`: one row per (event, endpoint): its state (pending, delivered,
  dead), attempts, when the next is due, the lease of the send in progress.
* `webhook_delivery_attempts`: one row per POST: time, HTTP status, duration, error.
* `webhook_redeliveries`: who asked for an event to be sent again, when, to which endpoint.

`merchant_event_record(merchant, type, subject, data)` is THE way an event is recorded:
it inserts the event once per (type, subject) and, in the same statement, one delivery per
enabled endpoint of the merchant that wants the type and one `endpoint.deliver` outbox row
per delivery (the relay publishes them after the commit). It returns the event's id, or
NULL when the (type, subject) was recorded already (nothing fanned out twice).
SECURITY DEFINER with a pinned search_path, as the stream's own recording function is: the
service role need not insert into `merchant_events` itself (a revision that revokes that
INSERT keeps every event recorded and fanned out).

Revision ID: 0039_webhook_endpoints
Revises: 0038_api_keys
"""

import importlib

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0039_webhook_endpoints"
down_revision = "0038_api_keys"
branch_labels = None
depends_on = None

_0037 = importlib.import_module("payflow.db.migrations.versions.0037_event_emission")
_0032 = importlib.import_module("payflow.db.migrations.versions.0032_definer_postings")

ENDPOINTS = """
    CREATE TABLE webhook_endpoints (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        merchant_id uuid NOT NULL REFERENCES merchants (id),
        url text NOT NULL CONSTRAINT webhook_endpoints_url_length
            CHECK (length(url) BETWEEN 1 AND 2048),
        description text NOT NULL DEFAULT '' CONSTRAINT webhook_endpoints_description_length
            CHECK (length(description) <= 500),
        enabled_events text[] NOT NULL CONSTRAINT webhook_endpoints_events_valid
            CHECK (cardinality(enabled_events) BETWEEN 1 AND 20
                   AND array_position(enabled_events, NULL) IS NULL),
        enabled boolean NOT NULL DEFAULT true,
        secret text NOT NULL CONSTRAINT webhook_endpoints_secret_format
            CHECK (secret LIKE 'whsec\\_%'),
        previous_secret text,
        previous_secret_until timestamptz,
        failing_since timestamptz,
        disabled_at timestamptz,
        disabled_reason text CONSTRAINT webhook_endpoints_disabled_reason_valid
            CHECK (disabled_reason IN ('merchant', 'failing', 'deleted')),
        deleted_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT webhook_endpoints_previous_pair
            CHECK ((previous_secret IS NULL) = (previous_secret_until IS NULL)),
        CONSTRAINT webhook_endpoints_deleted_disabled
            CHECK (deleted_at IS NULL OR NOT enabled)
    )
"""

DELIVERIES = """
    CREATE TABLE webhook_deliveries (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        event_id text NOT NULL REFERENCES merchant_events (id) ON DELETE CASCADE,
        endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id),
        merchant_id uuid NOT NULL REFERENCES merchants (id),
        state text NOT NULL DEFAULT 'pending' CONSTRAINT webhook_deliveries_state_valid
            CHECK (state IN ('pending', 'delivered', 'dead')),
        attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        next_attempt_at timestamptz NOT NULL DEFAULT now(),
        lease_token text,
        lease_until timestamptz,
        last_http_status integer,
        delivered_at timestamptz,
        dead_at timestamptz,
        sweeps integer NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT webhook_deliveries_once UNIQUE (event_id, endpoint_id),
        CONSTRAINT webhook_deliveries_delivered_time
            CHECK ((state = 'delivered') = (delivered_at IS NOT NULL))
    )
"""

ATTEMPTS = """
    CREATE TABLE webhook_delivery_attempts (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        delivery_id bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
        attempted_at timestamptz NOT NULL DEFAULT now(),
        http_status integer,
        duration_ms integer NOT NULL CHECK (duration_ms >= 0),
        error text CHECK (length(error) <= 500)
    )
"""

REDELIVERIES = """
    CREATE TABLE webhook_redeliveries (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        event_id text NOT NULL,
        endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id),
        delivery_id bigint REFERENCES webhook_deliveries (id) ON DELETE SET NULL,
        merchant_id uuid NOT NULL REFERENCES merchants (id),
        requested_by text NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 300),
        requested_at timestamptz NOT NULL DEFAULT now()
    )
"""

RECORD_FUNCTION = """
    CREATE OR REPLACE FUNCTION merchant_event_record(
        p_merchant uuid, p_type text, p_subject text, p_data jsonb
    ) RETURNS text
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = public, pg_catalog, pg_temp
    AS $$
    DECLARE
        v_id text;
        v_fanned integer;
    BEGIN
        INSERT INTO merchant_events (id, merchant_id, type, subject_id, data)
        VALUES ('evt_' || replace(gen_random_uuid()::text, '-', ''),
                p_merchant, p_type, p_subject, p_data)
        ON CONFLICT ON CONSTRAINT merchant_events_once DO NOTHING
        RETURNING id INTO v_id;
        IF v_id IS NULL THEN
            RETURN NULL;  -- recorded already: its deliveries were made then
        END IF;
        WITH delivery AS (
            INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id)
            SELECT v_id, e.id, e.merchant_id FROM webhook_endpoints e
            WHERE e.merchant_id = p_merchant AND e.enabled
              AND ('*' = ANY (e.enabled_events) OR p_type = ANY (e.enabled_events))
            RETURNING id
        )
        INSERT INTO outbox (topic, payload)
        SELECT 'endpoint.deliver', jsonb_build_object('version', 1, 'delivery_id', d.id)
        FROM delivery d;
        GET DIAGNOSTICS v_fanned = ROW_COUNT;
        IF v_fanned > 0 THEN
            PERFORM pg_notify('payflow_outbox', '');  -- delivered at commit only
        END IF;
        RETURN v_id;
    END
    $$
"""

GRANTS = """
    CREATE FUNCTION payflow_grant_extra_0039_webhook_endpoints(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        -- Endpoints are soft-deleted (deliveries and their audit name them).
        EXECUTE format('REVOKE ALL ON public.webhook_endpoints FROM %I', app);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE ON public.webhook_endpoints TO %I', app);
        -- Deliveries change state; their rows go only with their event (retention).
        EXECUTE format('REVOKE ALL ON public.webhook_deliveries FROM %I', app);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE ON public.webhook_deliveries TO %I', app);
        -- The attempt log and the redelivery audit are append-only for the service.
        EXECUTE format('REVOKE ALL ON public.webhook_delivery_attempts FROM %I', app);
        EXECUTE format('GRANT SELECT, INSERT ON public.webhook_delivery_attempts TO %I', app);
        EXECUTE format('REVOKE ALL ON public.webhook_redeliveries FROM %I', app);
        EXECUTE format('GRANT SELECT, INSERT ON public.webhook_redeliveries TO %I', app);
        -- Events (and so their deliveries) are recorded only through the function.
        EXECUTE format('REVOKE INSERT ON public.merchant_events FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.merchant_event_record(uuid, text,'
                       ' text, jsonb) TO %I', app);
    END
    $$
"""

UPGRADE: list[str] = [
    ENDPOINTS,
    "CREATE INDEX webhook_endpoints_merchant_idx ON webhook_endpoints (merchant_id, created_at)",
    DELIVERIES,
    # The sweep: pending deliveries by when they were due.
    """CREATE INDEX webhook_deliveries_pending_idx ON webhook_deliveries (next_attempt_at)
       WHERE state = 'pending'""",
    "CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, id)",
    ATTEMPTS,
    """CREATE INDEX webhook_delivery_attempts_delivery_idx
       ON webhook_delivery_attempts (delivery_id, id)""",
    REDELIVERIES,
    "CREATE INDEX webhook_redeliveries_event_idx ON webhook_redeliveries (event_id)",
    # A dead-lettered delivery is a DLQ row of its own source, replayed by its replayer.
    "ALTER TABLE dead_letter_queue DROP CONSTRAINT dead_letter_queue_source_valid",
    """ALTER TABLE dead_letter_queue ADD CONSTRAINT dead_letter_queue_source_valid
       CHECK (source IN ('payment_event', 'payment', 'webhook', 'endpoint_delivery'))""",
    RECORD_FUNCTION,
    "REVOKE ALL ON FUNCTION merchant_event_record(uuid, text, text, jsonb) FROM PUBLIC",
    GRANTS,
    "REVOKE ALL ON FUNCTION payflow_grant_extra_0039_webhook_endpoints(name) FROM PUBLIC",
    _0032.APPLY_HOOK,
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    refuse_data_loss("SELECT EXISTS (SELECT 1 FROM webhook_endpoints)", "webhook endpoints")
    refuse_data_loss(
        "SELECT EXISTS (SELECT 1 FROM dead_letter_queue WHERE source = 'endpoint_delivery')",
        "dead-lettered endpoint deliveries",
    )
    execute_all(
        [
            "ALTER TABLE dead_letter_queue DROP CONSTRAINT dead_letter_queue_source_valid",
            """ALTER TABLE dead_letter_queue ADD CONSTRAINT dead_letter_queue_source_valid
               CHECK (source IN ('payment_event', 'payment', 'webhook'))""",
            "DROP FUNCTION payflow_grant_extra_0039_webhook_endpoints(name)",
            # The event stream's own recording (0037) comes back: payment_finalize calls it.
            _0037.RECORD_FUNCTION.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1),
            "DROP TABLE webhook_redeliveries",
            "DROP TABLE webhook_delivery_attempts",
            "DROP TABLE webhook_deliveries",
            "DROP TABLE webhook_endpoints",
        ]
    )
