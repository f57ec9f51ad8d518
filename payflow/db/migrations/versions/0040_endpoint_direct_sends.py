"""The worker that finalizes a payment sends its event to the merchant's endpoints itself.

* `merchant_event_record_leasing(merchant, type, subject, data, lease_token, lease_s)`
  (SECURITY DEFINER, like the recording function): `merchant_event_record`'s insert and
  fan-out, and with a lease token every delivery it makes is created under that lease
  (`lease_token`, `lease_until` = now + `lease_s`) with its `endpoint.deliver` job held back
  until the lease ends. It returns the event id and the deliveries with their jobs' ids.
  `merchant_event_record` keeps its signature and calls it with no lease.
* `payment_finalize` takes two more parameters, $24 the lease token of the worker's own
  first sends and $25 its seconds, and answers `o_held_deliveries` and
  `o_held_delivery_jobs`. The signature changes, so the function is dropped and created
  again, and 0022's grant hook (which names the old signature) gives way to this
  revision's.

The held job is the send's guarantee, as the payment webhook's is since 0016: a worker
that dies before it settles the job leaves it to the relay once the lease ends.

Revision ID: 0040_endpoint_direct_sends
Revises: 0039_webhook_endpoints
"""

import importlib

from payflow.db.functions import function_definition
from payflow.db.migrations.statements import execute_all

revision = "0040_endpoint_direct_sends"
down_revision = "0039_webhook_endpoints"
branch_labels = None
depends_on = None

_0022 = importlib.import_module("payflow.db.migrations.versions.0022_finalize_posts_credit")
_0032 = importlib.import_module("payflow.db.migrations.versions.0032_definer_postings")
_0037 = importlib.import_module("payflow.db.migrations.versions.0037_event_emission")
_0039 = importlib.import_module("payflow.db.migrations.versions.0039_webhook_endpoints")

LEASING = "merchant_event_record_leasing(uuid, text, text, jsonb, text, double precision)"
FINALIZE = (
    "payment_finalize(uuid, text, uuid, text, text, numeric, text, text, text, jsonb, text,"
    " jsonb, double precision, text, text, text, integer, text, double precision, text,"
    " text[], text[], text[], text, double precision)"
)

GRANT_HOOK = f"""
    CREATE FUNCTION payflow_grant_extra_0040_endpoint_direct_sends(app name) RETURNS void
    LANGUAGE plpgsql
    SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$
    BEGIN
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.{FINALIZE} TO %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION public.{LEASING} TO %I', app);
    END
    $$
"""


def _hook_0022() -> str:
    """0022's grant hook, as 0022 created it."""
    [hook] = [s for s in _0022.UPGRADE if "payflow_grant_extra_0022" in s and "CREATE" in s]
    return str(hook)


def upgrade() -> None:
    execute_all(
        [
            function_definition("payflow.webhooks", "merchant_event_record_leasing"),
            f"REVOKE ALL ON FUNCTION {LEASING} FROM PUBLIC",
            function_definition("payflow.webhooks", "merchant_event_record"),
            "DROP FUNCTION payflow_grant_extra_0022_finalize_posts_credit(name)",
            f"DROP FUNCTION {_0022.SIGNATURE}",
            function_definition("payflow.payments", "payment_finalize"),
            f"REVOKE ALL ON FUNCTION {FINALIZE} FROM PUBLIC",
            GRANT_HOOK,
            "REVOKE ALL ON FUNCTION payflow_grant_extra_0040_endpoint_direct_sends(name)"
            " FROM PUBLIC",
            _0032.APPLY_HOOK,
        ]
    )


def downgrade() -> None:
    execute_all(
        [
            "DROP FUNCTION payflow_grant_extra_0040_endpoint_direct_sends(name)",
            f"DROP FUNCTION {FINALIZE}",
            _0037._finalize_with_event(),
            f"REVOKE ALL ON FUNCTION {_0022.SIGNATURE} FROM PUBLIC",
            _hook_0022(),
            "REVOKE ALL ON FUNCTION payflow_grant_extra_0022_finalize_posts_credit(name)"
            " FROM PUBLIC",
            _0039.RECORD_FUNCTION,
            f"DROP FUNCTION {LEASING}",
            _0032.REGRANT,
        ]
    )
