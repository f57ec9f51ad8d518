"""Each chain's network identity, and credits that a reorg undid and the chain gave back.

- `chains.chain_id`: the EIP-155 chain id the chain's node must answer to `eth_chainId`
  (`ETH_MAINNET` is 1). Chain work stops with one line when the configured node, the
  setting (`ETH_CHAIN_ID`, `EVM_CHAINS.<name>.chain_id`) and this column disagree.
- `chain_deposits.past_credit_events`: the credit events of earlier lives of a deposit.
  A credited deposit reversed by a deep reorg is watched like an orphan; when the same
  transfer is mined again it is credited again under a new event id
  (`chain:<transfer id>~<n>`), and the old event id moves here so reconciliation still
  finds the deposit behind every confirmed credit event.

Revision ID: 0027_chain_identity
Revises: 0026_payout_stalls
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0027_chain_identity"
down_revision = "0026_payout_stalls"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    """
    ALTER TABLE chains
        ADD COLUMN chain_id BIGINT CONSTRAINT chains_chain_id_positive CHECK (chain_id > 0)
    """,
    "UPDATE chains SET chain_id = 1 WHERE chain = 'ETH_MAINNET'",
    """
    ALTER TABLE chain_deposits
        ADD COLUMN past_credit_events TEXT[] NOT NULL DEFAULT '{}'
    """,
]

# A chain id is configuration; past credit events are not, so the downgrade refuses
# (unless forced) while a deposit holds any.
DOWNGRADE: list[str] = [
    "ALTER TABLE chain_deposits DROP COLUMN past_credit_events",
    "ALTER TABLE chains DROP COLUMN chain_id",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    refuse_data_loss(
        "SELECT EXISTS (SELECT 1 FROM chain_deposits WHERE cardinality(past_credit_events) > 0)",
        "credit events of deposits a reorg undid and the chain gave back",
    )
    execute_all(DOWNGRADE)
