"""Provider ingress: token registry per chain, provider id namespaces.

- `chains`: each chain payflow accepts deposits on, with its native asset and decimals.
- `chain_tokens`: (chain, contract address) → asset code and on-chain decimals. A token
  is known by its contract, never by the symbol a payload carries.
- `provider_deliveries`: the exact bytes of a signed delivery that held anything kept
  for review, stored once per body digest.
- `unmatched_provider_events`: more reasons, the delivery digest and position of the
  activity (its raw bytes), and a free-text detail.

Provider event ids get their own namespace in code (`gen:`, `alchemy:`); nothing in
the schema changes for that.

Revision ID: 0005_ingress_tokens
Revises: 0004_pipeline
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0005_ingress_tokens"
down_revision = "0004_pipeline"
branch_labels = None
depends_on = None

OLD_REASONS = "'unknown_address', 'asset_mismatch', 'unknown_asset', 'unsupported'"
NEW_REASONS = (
    OLD_REASONS + ", 'unknown_token', 'unknown_chain', 'nft', 'zero_value', 'invalid',"
    " 'ambiguous_id', 'removed', 'over_limit'"
)
SEED_CONTRACTS = (
    "'0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48', '0xdac17f958d2ee523a2206206994597c13d831ec7',"
    " '0x2260fac5e5542a773aa44fbcfedf7c193bc2c599', '0x6b175474e89094c44da98b954eedeac495271d0f'"
)

UPGRADE: list[str] = [
    """
    CREATE TABLE chains (
        chain TEXT PRIMARY KEY CONSTRAINT chains_chain_format CHECK (chain ~ '^[A-Z0-9_]{2,40}$'),
        native_asset TEXT NOT NULL REFERENCES assets (code),
        native_decimals SMALLINT NOT NULL
            CONSTRAINT chains_native_decimals_range CHECK (native_decimals BETWEEN 0 AND 18),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    "INSERT INTO chains (chain, native_asset, native_decimals) VALUES ('ETH_MAINNET', 'ETH', 18)",
    """
    CREATE TABLE chain_tokens (
        chain TEXT NOT NULL REFERENCES chains (chain),
        contract TEXT NOT NULL
            CONSTRAINT chain_tokens_contract_format CHECK (contract ~ '^0x[0-9a-f]{40}$'),
        asset TEXT NOT NULL REFERENCES assets (code),
        decimals SMALLINT NOT NULL
            CONSTRAINT chain_tokens_decimals_range CHECK (decimals BETWEEN 0 AND 18),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        CONSTRAINT chain_tokens_pkey PRIMARY KEY (chain, contract)
    )
    """,
    f"""
    INSERT INTO chain_tokens (chain, contract, asset, decimals)
    SELECT 'ETH_MAINNET', contract, asset, decimals
    FROM unnest(ARRAY[{SEED_CONTRACTS}], ARRAY['USDC', 'USDT', 'WBTC', 'DAI'], ARRAY[6, 6, 8, 18])
        AS seed (contract, asset, decimals)
    """,
    """
    CREATE TABLE provider_deliveries (
        body_sha256 BYTEA PRIMARY KEY
            CONSTRAINT provider_deliveries_digest_length CHECK (length(body_sha256) = 32),
        body BYTEA NOT NULL,
        received_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
    """,
    "ALTER TABLE unmatched_provider_events DROP CONSTRAINT unmatched_reason_valid",
    f"""
    ALTER TABLE unmatched_provider_events
        ADD CONSTRAINT unmatched_reason_valid CHECK (reason IN ({NEW_REASONS})),
        ADD COLUMN delivery_sha256 BYTEA REFERENCES provider_deliveries (body_sha256),
        ADD COLUMN position INTEGER
            CONSTRAINT unmatched_position_non_negative CHECK (position >= 0),
        ADD COLUMN detail TEXT
    """,
]

DOWNGRADE: list[str] = [
    # Reached only when nothing would be lost or the run was forced (see `downgrade`).
    f"DELETE FROM unmatched_provider_events WHERE reason NOT IN ({OLD_REASONS})",
    "ALTER TABLE unmatched_provider_events DROP CONSTRAINT unmatched_reason_valid",
    """
    ALTER TABLE unmatched_provider_events
        DROP COLUMN detail, DROP COLUMN position, DROP COLUMN delivery_sha256
    """,
    f"""
    ALTER TABLE unmatched_provider_events
        ADD CONSTRAINT unmatched_reason_valid CHECK (reason IN ({OLD_REASONS}))
    """,
    "DROP TABLE provider_deliveries",
    "DROP TABLE chain_tokens",
    "DROP TABLE chains",
]

# Data a downgrade would lose: unmatched rows under the new reasons (their CHECK would
# fail), kept delivery bytes, and tokens or chains an operator registered.
LOSES_DATA = f"""
SELECT EXISTS (SELECT 1 FROM unmatched_provider_events WHERE reason NOT IN ({OLD_REASONS}))
    OR EXISTS (SELECT 1 FROM provider_deliveries)
    OR EXISTS (SELECT 1 FROM chains WHERE chain <> 'ETH_MAINNET')
    OR EXISTS (SELECT 1 FROM chain_tokens
               WHERE chain <> 'ETH_MAINNET' OR contract NOT IN ({SEED_CONTRACTS}))
"""


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    refuse_data_loss(LOSES_DATA, "unmatched provider events, delivery bytes or registered tokens")
    execute_all(DOWNGRADE)
