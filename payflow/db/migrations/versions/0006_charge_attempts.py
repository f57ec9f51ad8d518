"""Payments: charge attempts claimed before the gateway is called.

One row per claim of a payment's gateway charge. The payment worker commits a
`claimed` row (with a lease) BEFORE it calls the gateway, and records the gateway's
answer (`approved` / `declined`) in the transaction that finalizes the payment. A claim
whose lease expired without an answer is `superseded` by the next claim, which asks the
gateway for the outcome instead of charging again; one that dead-lettered without a
known outcome is `needs_review` (the payment stays pending).

Revision ID: 0006_charge_attempts
Revises: 0005_ingress_tokens
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0006_charge_attempts"
down_revision = "0005_ingress_tokens"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    """
    CREATE TABLE charge_attempts (
        attempt_id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
        payment_id UUID NOT NULL
            CONSTRAINT charge_attempts_payment_fk REFERENCES payments (id),
        attempt INTEGER NOT NULL CONSTRAINT charge_attempts_attempt_positive CHECK (attempt >= 1),
        state TEXT NOT NULL DEFAULT 'claimed' CONSTRAINT charge_attempts_state_valid CHECK (
            state IN ('claimed', 'approved', 'declined', 'superseded', 'needs_review')
        ),
        claimed_by TEXT NOT NULL,
        claimed_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
        lease_until TIMESTAMPTZ NOT NULL,
        reason TEXT NOT NULL DEFAULT ''
            CONSTRAINT charge_attempts_reason_length CHECK (length(reason) <= 1024),
        gateway_reference TEXT NOT NULL DEFAULT ''
            CONSTRAINT charge_attempts_reference_length CHECK (length(gateway_reference) <= 256),
        answered_at TIMESTAMPTZ,
        CONSTRAINT charge_attempts_payment_attempt_unique UNIQUE (payment_id, attempt),
        CONSTRAINT charge_attempts_answered_when_final CHECK (
            (state IN ('approved', 'declined')) = (answered_at IS NOT NULL)
        )
    )
    """,
    # At most one open (unanswered, not superseded) attempt per payment ...
    """
    CREATE UNIQUE INDEX charge_attempts_one_open ON charge_attempts (payment_id)
        WHERE state IN ('claimed', 'needs_review')
    """,
    # ... and at most one recorded gateway answer per payment.
    """
    CREATE UNIQUE INDEX charge_attempts_one_answer ON charge_attempts (payment_id)
        WHERE state IN ('approved', 'declined')
    """,
    # What an operator looks at: attempts waiting for a human.
    """
    CREATE INDEX charge_attempts_needs_review_idx ON charge_attempts (claimed_at)
        WHERE state = 'needs_review'
    """,
]

DOWNGRADE: list[str] = [
    "DROP TABLE charge_attempts",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    refuse_data_loss(
        "SELECT EXISTS (SELECT 1 FROM charge_attempts)",
        "charge attempts: which payments were charged at the gateway",
    )
    execute_all(DOWNGRADE)
