"""`payment_finalize` finds its payment through the key, never through the pending index.

The function of 0022 locked its payment with `WHERE p.id = $1 AND p.status = 'pending'`.
That literal lets the planner prove the partial index `payments_pending_created_idx`
(`ON payments (created_at) WHERE status = 'pending'`) applies, and when its statistics were
taken on a quiet ledger the index looks nearly empty, so the plan walked every pending
payment and filtered it by id instead of using `payments_pkey`. The cost grows with the
payments in flight: with the seed's 2-5 s gateway at 200 payments/s about 600 rows were
read and thrown away per finalize (auto_explain, `payflow bench e2e --gateway-delay 2-5`),
and the worker's claim statement did the same (fixed in `payflow/payments/queries.sql`).

This revision replaces the function with the same body but for that one condition, which
now reads "not final" (`status NOT IN ('succeeded', 'failed')`): the same rows under the
CHECK `payments_status_valid`, and a condition no partial index's predicate follows from.
The body is 0022's, rewritten here by an exact substitution that must match once, so the
two revisions cannot drift apart; the downgrade restores 0022's body.

Revision ID: 0024_finalize_key_lookup
Revises: 0023_state_gauges
"""

import importlib

from payflow.db.migrations.statements import execute_all

revision = "0024_finalize_key_lookup"
down_revision = "0023_state_gauges"
branch_labels = None
depends_on = None

_0022 = importlib.import_module("payflow.db.migrations.versions.0022_finalize_posts_credit")

PENDING_BY_LITERAL = "WHERE p.id = $1 AND p.status = 'pending'"
PENDING_BY_KEY = "WHERE p.id = $1 AND p.status NOT IN ('succeeded', 'failed')"


def _replacing(body: str) -> str:
    """0022's `CREATE FUNCTION payment_finalize` as a `CREATE OR REPLACE` of `body`;
    `RuntimeError` when 0022's body is not the one this revision rewrites (checked when
    the step runs, so loading the history never depends on it)."""
    created = "CREATE FUNCTION payment_finalize("
    if body.count(created) != 1 or body.count(PENDING_BY_LITERAL) != 1:
        raise RuntimeError("0022's payment_finalize is not the body 0024 rewrites")
    return body.replace(created, "CREATE OR REPLACE FUNCTION payment_finalize(")


def upgrade_statements() -> list[str]:
    """The upgrade: 0022's function with its payment found through the key."""
    return [_replacing(_0022.UPGRADE[0]).replace(PENDING_BY_LITERAL, PENDING_BY_KEY)]


def downgrade_statements() -> list[str]:
    """The downgrade: 0022's function as it was."""
    return [_replacing(_0022.UPGRADE[0])]


def upgrade() -> None:
    execute_all(upgrade_statements())


def downgrade() -> None:
    execute_all(downgrade_statements())
