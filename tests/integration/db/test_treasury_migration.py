"""The treasury migration (0031): a balanced sweep between two system accounts posts once
per reference and refuses to be unbalanced or empty; its downgrade refuses to drop
treasury addresses or sweeps unless forced, and round-trips on an empty database."""

from __future__ import annotations

from collections.abc import Iterator

import asyncpg
import pytest

from payflow.db import migrate
from tests.integration.db.scratch import run_sql, scratch_database

BEFORE = "0029_double_entry_books"
TREASURY = "0030_treasury_sweeps"


@pytest.fixture
def url() -> Iterator[str]:
    with scratch_database("treasury") as url:
        yield url


_run = run_sql


def _version(url: str) -> list[str]:
    return [r["version_num"] for r in _run(url, migrate.current_revision_sql())]


SWEEP = (
    "SELECT ledger_post_system_transfer('treasury_sweep', '0xab:0',"
    " ledger_account('treasury', 'ETH_MAINNET', 'ETH'),"
    " ledger_account('custody', 'ETH_MAINNET', 'ETH'), 2) AS id"
)


def test_a_sweep_posts_once_balanced_and_the_downgrade_refuses_to_drop_it(url: str) -> None:
    migrate.upgrade(url, TREASURY)
    [first] = _run(url, SWEEP)
    [again] = _run(url, SWEEP)
    assert first["id"] is not None and again["id"] is None  # once per (kind, reference)
    legs = _run(url, "SELECT ledger_account, amount FROM ledger_legs ORDER BY amount")
    assert [(r["ledger_account"], int(r["amount"])) for r in legs] == [
        ("treasury:ETH_MAINNET:ETH", -2),
        ("custody:ETH_MAINNET:ETH", 2),
    ]
    kinds = _run(
        url, "SELECT kind, chain, normal_side FROM ledger_accounts WHERE kind = 'treasury'"
    )
    assert [(r["kind"], r["chain"], r["normal_side"]) for r in kinds] == [
        ("treasury", "ETH_MAINNET", "debit")
    ]
    with pytest.raises(asyncpg.CheckViolationError):
        _run(url, SWEEP.replace("'0xab:0'", "'0xab:1'").replace(", 2)", ", 0)"))
    with pytest.raises(asyncpg.CheckViolationError, match=r"ledger_posting_balanced|balance"):
        _run(
            url,
            "WITH t AS (INSERT INTO ledger_transfers (kind, reference)"
            " VALUES ('treasury_sweep', 'lopsided') RETURNING id)"
            " INSERT INTO ledger_legs (transfer_id, ledger_account, amount, kind)"
            " SELECT id, 'custody:ETH_MAINNET:ETH', 1, 'treasury_sweep' FROM t",
        )

    with pytest.raises(migrate.DataLossRefused, match="treasury"):
        migrate.downgrade(url, BEFORE)
    assert _version(url) == [TREASURY]
    migrate.downgrade(url, BEFORE, force=True)
    assert _version(url) == [BEFORE]
    assert _run(url, "SELECT to_regclass('treasury_addresses') AS t")[0]["t"] is None
    assert _run(url, "SELECT count(*) AS n FROM ledger_legs")[0]["n"] == 0
    migrate.upgrade(url, TREASURY)  # and up again
    assert _version(url) == [TREASURY]


def test_an_empty_database_round_trips(url: str) -> None:
    migrate.upgrade(url, TREASURY)
    _run(
        url,
        "INSERT INTO treasury_addresses (chain, address, added_by)"
        " VALUES ('ETH_MAINNET', '0x" + "ab" * 20 + "', 'ops')",
    )
    with pytest.raises(asyncpg.UniqueViolationError):
        _run(
            url,
            "INSERT INTO treasury_addresses (chain, address, added_by)"
            " VALUES ('ETH_MAINNET', '0x" + "ab" * 20 + "', 'ops')",
        )
    _run(url, "UPDATE treasury_addresses SET removed_at = now(), removed_by = 'lead'")
    _run(url, "DELETE FROM treasury_addresses")
    migrate.downgrade(url, BEFORE)
    assert _version(url) == [BEFORE]
    migrate.upgrade(url, TREASURY)
    assert _version(url) == [TREASURY]
