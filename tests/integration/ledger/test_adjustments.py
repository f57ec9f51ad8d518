"""`payflow ledger adjust` as an operator runs it (a subprocess on the real PostgreSQL):
one balanced `adjustment` transfer with its audit row, refusals in one line with exit 2,
and a reference that adjusts once however often it is given."""

from __future__ import annotations

import json
from decimal import Decimal

import asyncpg
import pytest

from payflow.config import Settings
from tests.integration.ledger.books import assert_books_balance, system_balance
from tests.integration.ledger.helpers import balance, count, new_account
from tests.integration.ops.conftest import payflow_cli


def _adjust(settings: Settings, *args: str) -> tuple[int, dict[str, object] | None, str]:
    done = payflow_cli(settings, "ledger", "adjust", *args)
    out = json.loads(done.stdout) if done.returncode == 0 else None
    return done.returncode, out, done.stderr.strip()


async def test_positive_and_negative_adjustments_balance_and_are_audited(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings, asset="USD", opening="10")
    rc, out, err = _adjust(
        settings, str(account), "2.50", "--against", "adjustments:USD",
        "--reason", "goodwill credit", "--by", "alice",
    )  # fmt: skip
    assert rc == 0, err
    assert out is not None and out["created"] is True and out["amount"] == "2.5"
    assert await balance(pool, account) == Decimal("12.50")
    rc, out, err = _adjust(
        settings, str(account), "-1.25", "--against", "adjustments:USD",
        "--reason", "double credit reversed", "--by", "bob",
    )  # fmt: skip
    assert rc == 0, err
    assert out is not None and out["amount"] == "-1.25"
    assert await balance(pool, account) == Decimal("11.25")
    # adjustments:USD (debit-normal) carries the net correction payflow gave away
    assert await system_balance(pool, "adjustments:USD") == Decimal("1.25")

    audit = await pool.fetch(
        "SELECT j.amount, j.reason, j.adjusted_by, j.against, j.created_at, t.kind"
        " FROM ledger_adjustments j JOIN ledger_transfers t ON t.id = j.transfer_id"
        " WHERE j.account_id = $1 ORDER BY j.id",
        account,
    )
    assert [(r["amount"], r["reason"], r["adjusted_by"], r["kind"]) for r in audit] == [
        (Decimal("2.5"), "goodwill credit", "alice", "adjustment"),
        (Decimal("-1.25"), "double credit reversed", "bob", "adjustment"),
    ]
    assert all(r["created_at"] is not None and r["against"] == "adjustments:USD" for r in audit)
    await assert_books_balance(pool)

    # The audit is append-only, and the service role cannot write it at all.
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await pool.execute("UPDATE ledger_adjustments SET reason = 'x'")
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await pool.execute(
            "INSERT INTO ledger_adjustments (transfer_id, reference, account_id, against,"
            " asset, amount, reason, adjusted_by) SELECT transfer_id, 'forged', account_id,"
            " against, asset, amount, reason, adjusted_by FROM ledger_adjustments LIMIT 1"
        )


async def test_refusals_are_one_line_with_exit_2_and_write_nothing(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings, asset="USD", opening="10")
    await owner_pool.execute("UPDATE accounts SET held = 4 WHERE id = $1", account)
    cases = [
        # below the held amount (10 - 7 = 3 < 4 held)
        ((str(account), "-7", "--against", "adjustments:USD"), "held"),
        # negative
        ((str(account), "-11", "--against", "adjustments:USD"), "refused"),
        # assets differ
        ((str(account), "1", "--against", "adjustments:ETH"), "assets differ"),
        # not a system account
        ((str(account), "1", "--against", str(account)), "not a system account"),
        ((str(account), "1", "--against", "adjustments:NOPE"), "not a system account"),
        # an unknown account
        (("00000000-0000-0000-0000-000000000009", "1", "--against", "adjustments:USD"),
         "does not exist"),
        # not an amount
        ((str(account), "1e3", "--against", "adjustments:USD"), "signed decimal"),
        ((str(account), "0", "--against", "adjustments:USD"), "zero"),
        ((str(account), "0.001", "--against", "adjustments:USD"), "decimal places"),
    ]  # fmt: skip
    for args, message in cases:
        rc, _, err = _adjust(settings, *args, "--reason", "test", "--by", "carol")
        assert rc == 2, (args, err)
        assert message in err and len(err.splitlines()) == 1, (args, err)
    rc, _, err = _adjust(settings, str(account), "1", "--against", "adjustments:USD")
    assert rc == 2 and "--reason" in err
    assert await balance(pool, account) == Decimal("10")
    assert await count(pool, "SELECT count(*) FROM ledger_adjustments") == 0
    assert await count(pool, "SELECT count(*) FROM ledger_transfers WHERE kind = 'adjustment'") == 0
    # down to exactly the held amount is allowed
    rc, _, err = _adjust(
        settings, str(account), "-6", "--against", "adjustments:USD",
        "--reason", "chargeback", "--by", "carol",
    )  # fmt: skip
    assert rc == 0, err
    assert await balance(pool, account) == Decimal("4")
    await assert_books_balance(pool)


async def test_a_reference_adjusts_once(pool: asyncpg.Pool, settings: Settings) -> None:
    account = await new_account(pool, settings, asset="USD", opening="1")
    args = (str(account), "5", "--against", "adjustments:USD", "--reason", "r", "--by", "dan")
    first = _adjust(settings, *args, "--reference", "ticket-77")
    second = _adjust(settings, *args, "--reference", "ticket-77")
    assert first[0] == second[0] == 0, (first[2], second[2])
    assert first[1] is not None and second[1] is not None
    assert first[1]["created"] is True and second[1]["created"] is False
    assert first[1]["transfer_id"] == second[1]["transfer_id"]
    assert await balance(pool, account) == Decimal("6")
    # the same reference for another adjustment is refused, not applied
    rc, _, err = _adjust(
        settings, str(account), "6", "--against", "adjustments:USD", "--reason", "r",
        "--by", "dan", "--reference", "ticket-77",
    )  # fmt: skip
    assert rc == 2 and "different adjustment" in err
    assert await balance(pool, account) == Decimal("6")
    assert await count(pool, "SELECT count(*) FROM ledger_adjustments") == 1
    await assert_books_balance(pool)


async def test_a_system_account_is_adjusted_on_its_normal_side(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    rc, out, err = _adjust(
        settings, "fees:USD", "3", "--against", "adjustments:USD",
        "--reason", "fee booked by hand", "--by", "erin",
    )  # fmt: skip
    assert rc == 0, err
    assert out is not None and out["account"] == "fees:USD"
    assert await system_balance(pool, "fees:USD") == Decimal("3")  # credit-normal
    assert await system_balance(pool, "adjustments:USD") == Decimal("3")  # debit-normal
    rc, _, err = _adjust(
        settings, "adjustments:USD", "1", "--against", "adjustments:USD",
        "--reason", "x", "--by", "erin",
    )  # fmt: skip
    assert rc == 2 and "two different accounts" in err
    await assert_books_balance(pool)
