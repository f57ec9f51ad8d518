"""Money: wider balances and per-asset limits.

- Balances are wider than amounts: `accounts.balance`, `accounts.initial_balance` and
  `balance_events.balance_after` become NUMERIC(78,18) (below 10^60) while every amount
  stays NUMERIC(38,18) (below 10^20): no sequence of accepted amounts can overflow a
  balance in practice (it would take 10^40 maximal credits).
- Every asset gets a maximum per payment, withdrawal and deposit (named CHECKs keep
  each one positive and below the amount column's range). Seeded defaults: 10^9 for
  RUB, USD, EUR, USDC, USDT and DAI; 10^6 for ETH; 10^5 for WBTC. An asset added later
  gets 10^9 unless the operator sets otherwise (`payflow assets set-limit`).
- `processed_events.outcome` may be `amount_overflow`: a balance overflow that still
  happens is a terminal, recorded outcome, never a dead-letter loop.

Revision ID: 0008_money_limits
Revises: 0007_pipeline_sweeps
"""

from payflow.db.migrations.statements import execute_all, refuse_data_loss

revision = "0008_money_limits"
down_revision = "0007_pipeline_sweeps"
branch_labels = None
depends_on = None

LIMIT_COLUMNS = ("max_payment", "max_withdrawal", "max_deposit")

UPGRADE: list[str] = [
    "ALTER TABLE accounts ALTER COLUMN balance TYPE NUMERIC(78, 18)",
    "ALTER TABLE accounts ALTER COLUMN initial_balance TYPE NUMERIC(78, 18)",
    "ALTER TABLE balance_events ALTER COLUMN balance_after TYPE NUMERIC(78, 18)",
    *(
        f"""
        ALTER TABLE assets ADD COLUMN {column} NUMERIC(38, 18) NOT NULL DEFAULT 1000000000
            CONSTRAINT assets_{column}_range
            CHECK ({column} > 0 AND {column} < 100000000000000000000)
        """
        for column in LIMIT_COLUMNS
    ),
    """
    UPDATE assets SET max_payment = 1000000, max_withdrawal = 1000000, max_deposit = 1000000
    WHERE code = 'ETH'
    """,
    """
    UPDATE assets SET max_payment = 100000, max_withdrawal = 100000, max_deposit = 100000
    WHERE code = 'WBTC'
    """,
    "ALTER TABLE processed_events DROP CONSTRAINT processed_events_outcome_valid",
    """
    ALTER TABLE processed_events ADD CONSTRAINT processed_events_outcome_valid CHECK (
        outcome IN ('pending', 'success', 'insufficient_funds', 'account_frozen',
                    'amount_overflow')
    )
    """,
]

DOWNGRADE: list[str] = [
    "ALTER TABLE processed_events DROP CONSTRAINT processed_events_outcome_valid",
    """
    ALTER TABLE processed_events ADD CONSTRAINT processed_events_outcome_valid CHECK (
        outcome IN ('pending', 'success', 'insufficient_funds', 'account_frozen')
    )
    """,
    *(f"ALTER TABLE assets DROP COLUMN {column}" for column in LIMIT_COLUMNS),
    "ALTER TABLE balance_events ALTER COLUMN balance_after TYPE NUMERIC(38, 18)",
    "ALTER TABLE accounts ALTER COLUMN initial_balance TYPE NUMERIC(38, 18)",
    "ALTER TABLE accounts ALTER COLUMN balance TYPE NUMERIC(38, 18)",
]

# Both checks guard data the old schema cannot hold; even when forced, the statements
# themselves then fail (a value out of range, a CHECK violated) and nothing is lost.
WIDE_BALANCES = """
    SELECT EXISTS (SELECT 1 FROM accounts
                   WHERE balance >= 1e20 OR initial_balance >= 1e20)
        OR EXISTS (SELECT 1 FROM balance_events WHERE balance_after >= 1e20)
"""
OVERFLOW_OUTCOMES = (
    "SELECT EXISTS (SELECT 1 FROM processed_events WHERE outcome = 'amount_overflow')"
)
# Limits an operator set (`payflow assets set-limit`): dropping the columns loses them,
# and the next upgrade silently reseeds the defaults.
OPERATOR_LIMITS = """
    SELECT EXISTS (
        SELECT 1 FROM assets
        WHERE (max_payment, max_withdrawal, max_deposit) IS DISTINCT FROM (
            CASE code WHEN 'ETH' THEN 1000000 WHEN 'WBTC' THEN 100000 ELSE 1000000000 END,
            CASE code WHEN 'ETH' THEN 1000000 WHEN 'WBTC' THEN 100000 ELSE 1000000000 END,
            CASE code WHEN 'ETH' THEN 1000000 WHEN 'WBTC' THEN 100000 ELSE 1000000000 END
        )
    )
"""


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    refuse_data_loss(WIDE_BALANCES, "balances of 10^20 or more do not fit NUMERIC(38,18)")
    refuse_data_loss(OVERFLOW_OUTCOMES, "recorded amount_overflow outcomes")
    refuse_data_loss(OPERATOR_LIMITS, "per-asset limits set by an operator")
    execute_all(DOWNGRADE)
