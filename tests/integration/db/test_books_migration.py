"""The double-entry migration (0029) converts a database with data in place: every
journal row gets its counterparty leg, every initial balance becomes an opening transfer,
balances are unchanged and the trial balance is zero; it refuses (and rolls back) a
database whose balances do not match their journal, and its downgrade refuses to drop
legs the older schema cannot express unless forced."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from payflow.db import migrate
from tests.integration.db.scratch import run_sql, scratch_database

BEFORE = "0028_transfer_mismatch"
BOOKS = "0029_double_entry_books"


@pytest.fixture
def url() -> Iterator[str]:
    with scratch_database("books") as url:
        yield url


_run = run_sql


# As 0028's service wrote it: openings in initial_balance, one signed row per posting.
DATA = (
    "INSERT INTO merchants (id, name, api_key_hash, webhook_secret) VALUES"
    " ('00000000-0000-0000-0000-00000000000a', 'shop', 'sha256:a', 'whsec_a')",
    "INSERT INTO accounts (id, asset, balance, initial_balance) VALUES"
    " ('00000000-0000-0000-0000-000000000001', 'ETH', 12.5, 10),"
    " ('00000000-0000-0000-0000-000000000002', 'USDC', 3, 0),"
    " ('00000000-0000-0000-0000-000000000004', 'ETH', 7, 7)",
    "INSERT INTO accounts (id, asset, balance, merchant_id, settlement) VALUES"
    " ('00000000-0000-0000-0000-000000000003', 'USD', 20, "
    "'00000000-0000-0000-0000-00000000000a', true)",
    "INSERT INTO chain_deposits (transfer_id, chain, tx_hash, position, to_address, units,"
    " account_id, asset, amount, block_number, block_hash, sources, status, credit_event_id)"
    " VALUES ('ETH_MAINNET:0x" + "ab" * 32 + ":-1', 'ETH_MAINNET', '0x" + "ab" * 32 + "', -1,"
    " '0x" + "cd" * 20 + "', 1, '00000000-0000-0000-0000-000000000001', 'ETH', 4, 1,"
    " '0x"
    + "ab" * 32
    + "', ARRAY['scanner'], 'credited', 'chain:ETH_MAINNET:0x"
    + "ab" * 32
    + ":-1')",
    """INSERT INTO payment_events (event_id, account_id, amount, event_type, status) VALUES
       ('chain:ETH_MAINNET:0x"""
    + "ab" * 32
    + """:-1',
        '00000000-0000-0000-0000-000000000001', 4, 'deposit', 'confirmed'),
       ('wd-1', '00000000-0000-0000-0000-000000000001', 1.4, 'withdrawal', 'confirmed'),
       ('fee-1', '00000000-0000-0000-0000-000000000001', 0.1, 'withdrawal_fee', 'confirmed'),
       ('dep-2', '00000000-0000-0000-0000-000000000002', 3, 'deposit', 'confirmed'),
       ('pay-1', '00000000-0000-0000-0000-000000000003', 20, 'payment_credit', 'confirmed')""",
    """INSERT INTO balance_events (account_id, amount, event_type, source_event_id,
                                  balance_after)
       SELECT account_id, CASE WHEN event_type IN ('withdrawal', 'withdrawal_fee')
                               THEN -amount ELSE amount END, event_type, event_id, 0
       FROM payment_events ORDER BY event_id""",
)

BALANCES = "SELECT id, balance FROM accounts ORDER BY id"


def test_a_database_with_data_converts_in_place(url: str) -> None:
    migrate.upgrade(url, BEFORE)
    _run(url, *DATA)
    before = _run(url, BALANCES)

    migrate.upgrade(url)

    assert _run(url, BALANCES) == before
    trial = _run(
        url, "SELECT asset, sum(amount) AS total FROM ledger_journal GROUP BY asset ORDER BY 1"
    )
    assert [(r["asset"], r["total"]) for r in trial] == [
        ("ETH", 0),
        ("USD", 0),
        ("USDC", 0),
    ]
    legs = _run(
        url,
        "SELECT source_event_id, ledger_account, amount FROM ledger_legs"
        " WHERE source_event_id IS NOT NULL ORDER BY source_event_id",
    )
    tid = "ETH_MAINNET:0x" + "ab" * 32 + ":-1"
    assert [(r["source_event_id"], r["ledger_account"], r["amount"]) for r in legs] == [
        (f"chain:{tid}", "custody:ETH_MAINNET:ETH", Decimal("-4")),
        ("dep-2", "custody:external:USDC", Decimal("-3")),
        ("fee-1", "fees:ETH", Decimal("0.1")),
        ("pay-1", "gateway:USD", Decimal("-20")),
        ("wd-1", "custody:external:ETH", Decimal("1.4")),
    ]
    openings = _run(
        url,
        "SELECT t.reference, l.ledger_account, l.amount FROM ledger_transfers t"
        " JOIN ledger_legs l ON l.transfer_id = t.id WHERE t.kind = 'opening'"
        " ORDER BY t.reference, l.amount DESC",
    )
    assert [(r["reference"], r["ledger_account"], r["amount"]) for r in openings] == [
        ("00000000-0000-0000-0000-000000000001", None, Decimal("10")),
        ("00000000-0000-0000-0000-000000000001", "opening:ETH", Decimal("-10")),
        ("00000000-0000-0000-0000-000000000004", None, Decimal("7")),
        ("00000000-0000-0000-0000-000000000004", "opening:ETH", Decimal("-7")),
    ]
    # Nothing the older schema cannot express: the downgrade keeps every balance.
    migrate.downgrade(url, BEFORE)
    assert _run(url, BALANCES) == before
    migrate.upgrade(url)
    assert _run(url, BALANCES) == before
    assert _run(url, "SELECT count(*) AS n FROM ledger_legs")[0]["n"] == 9


def test_a_database_whose_balances_do_not_match_their_journal_is_refused(url: str) -> None:
    migrate.upgrade(url, BEFORE)
    _run(url, *DATA, "UPDATE accounts SET balance = 13 WHERE asset = 'USDC'")

    with pytest.raises(Exception, match="double-entry conversion refused: account"):
        migrate.upgrade(url)

    assert [r["version_num"] for r in _run(url, migrate.current_revision_sql())] == [BEFORE]
    assert _run(url, "SELECT to_regclass('ledger_legs') AS t")[0]["t"] is None


def test_the_downgrade_refuses_to_drop_what_the_old_journal_cannot_hold(url: str) -> None:
    migrate.upgrade(url, BEFORE)
    _run(url, *DATA)
    migrate.upgrade(url, BOOKS)  # the revision whose downgrade this tries
    # A movement between payflow's own accounts: the single-entry schema has no place for it.
    _run(
        url,
        """WITH t AS (INSERT INTO ledger_transfers (kind, reference)
                      VALUES ('opening', 'system-only') RETURNING id)
           INSERT INTO ledger_legs (transfer_id, ledger_account, amount, kind)
           SELECT t.id, code, amount, 'opening' FROM t,
                  (VALUES ('opening:ETH', -1::numeric), ('fees:ETH', 1::numeric)) AS v(code, amount)
        """,
    )

    at_head = [r["version_num"] for r in _run(url, migrate.current_revision_sql())]
    with pytest.raises(migrate.DataLossRefused, match="cannot express"):
        migrate.downgrade(url, BEFORE)
    # refused as a whole: the schema is where it was, the books' migration still applied
    assert [r["version_num"] for r in _run(url, migrate.current_revision_sql())] == at_head

    migrate.downgrade(url, BEFORE, force=True)
    assert [r["version_num"] for r in _run(url, migrate.current_revision_sql())] == [BEFORE]
    assert _run(url, "SELECT to_regclass('ledger_legs') AS t")[0]["t"] is None
