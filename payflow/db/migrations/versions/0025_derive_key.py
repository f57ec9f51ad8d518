"""The Idempotency-Key that derived a deposit address, on the address's row.

A derivation answered from its `api_idempotency` record only while the record is kept
(`IDEMPOTENCY_RETENTION_HOURS`); afterwards the same key would derive a second address
(`m/…/0/6` instead of `/0/0`). Every other idempotent create judges a retry
against its domain row once the record is gone (a payment by its key, a withdrawal by its
derived event id, a payout by its key); a derived address now does too:
`deposit_addresses.derived_by` (the merchant whose key it was) and `derive_key`, unique
together, NULL for an imported address.

Revision ID: 0025_derive_key
Revises: 0024_finalize_key_lookup
"""

from payflow.db.migrations.statements import execute_all

revision = "0025_derive_key"
down_revision = "0024_finalize_key_lookup"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    """
    ALTER TABLE deposit_addresses
        ADD COLUMN derived_by UUID,
        ADD COLUMN derive_key TEXT,
        ADD CONSTRAINT deposit_addresses_derive_key_pair
            CHECK ((derived_by IS NULL) = (derive_key IS NULL)),
        ADD CONSTRAINT deposit_addresses_derive_key_unique UNIQUE (derived_by, derive_key)
    """,
]

# Only the keys go: the addresses, their accounts and indexes stay (no money data).
DOWNGRADE: list[str] = [
    """
    ALTER TABLE deposit_addresses
        DROP CONSTRAINT deposit_addresses_derive_key_unique,
        DROP CONSTRAINT deposit_addresses_derive_key_pair,
        DROP COLUMN derive_key,
        DROP COLUMN derived_by
    """,
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
