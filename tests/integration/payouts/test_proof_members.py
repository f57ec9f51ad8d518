"""What a token payout's receipt must show before anything is posted or released, tried
from outside with a contract whose logs the test sets (`puppet.py`) on real anvil and
PostgreSQL: only the registered contract's single Transfer(hot wallet -> recipient,
units) confirms; a receipt where nothing of the hot wallet moved fails (the amount
released, the fee charged); a receipt where the hot wallet's tokens moved otherwise
(part, elsewhere, more, through another contract) is neither confirmed nor released: the
hold stays and a critical alert names it for an operator."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import asyncpg
import pytest

from payflow.alerts import Severity
from payflow.chain.payouts.engine import PayoutEngine
from payflow.config import Settings
from payflow_lab.anvil import AnvilNode
from tests.integration.payouts.conftest import (
    CHAIN,
    WEI,
    fresh_address,
    funded_account,
    ledger_rows,
    request_payout,
    settle_all,
)
from tests.integration.payouts.puppet import puppet
from tests.recording_alerts import RecordingSink

UNITS = 5_000_000  # 5 USDC at 6 decimals


async def _token_payout(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    settings: Settings,
    engine: PayoutEngine,
    logs: Any,
    *,
    via_other_contract: bool = False,
) -> tuple[Any, Any, str]:
    """(payout row after settling, account id, recipient) of a 5 USDC payout whose
    token contract logs `logs` (a function of hot wallet, recipient, stranger)."""
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    to, stranger = fresh_address(), fresh_address()
    token, other = fresh_address(), fresh_address()
    if via_other_contract:
        await puppet(anvil, other, logs(hot, to, stranger))
        await puppet(anvil, token, [], forward_to=other)
    else:
        await puppet(anvil, token, logs(hot, to, stranger))
    await owner_pool.execute(
        "INSERT INTO chain_tokens (chain, contract, asset, decimals) VALUES ($1, $2, 'USDC', 6)",
        CHAIN,
        token,
    )
    account = await funded_account(owner_pool, "USDC", Decimal("50"))
    payout = await request_payout(pool, settings, account, "5", to)
    engine.alerts = RecordingSink()
    await settle_all(engine, anvil, rounds=3)
    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    return row, account, to


async def _balances(pool: asyncpg.Pool, account: Any) -> tuple[Decimal, Decimal]:
    row = await pool.fetchrow("SELECT balance, held FROM accounts WHERE id = $1", account)
    return row["balance"], row["held"]


async def test_the_exact_transfer_confirms(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    row, account, _ = await _token_payout(
        anvil, pool, owner_pool, payout_settings, engine, lambda h, t, s: [(h, t, UNITS)]
    )
    assert row["status"] == "confirmed"
    assert await _balances(pool, account) == (Decimal("45"), Decimal(0))


@pytest.mark.parametrize("member", ["another_sender", "nothing"])
async def test_a_receipt_where_nothing_of_ours_moved_fails(
    member: str,
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    """The right amount to the recipient, but from another sender; or no log at all."""
    logs = {
        "another_sender": lambda h, t, s: [(s, t, UNITS)],
        "nothing": lambda h, t, s: [],
    }[member]
    row, account, _ = await _token_payout(anvil, pool, owner_pool, payout_settings, engine, logs)
    assert row["status"] == "failed"
    assert await _balances(pool, account) == (Decimal("50"), Decimal(0))
    assert await ledger_rows(pool, account) == []


@pytest.mark.parametrize(
    "member",
    [
        "part_to_recipient_rest_elsewhere",
        "exact_and_more_elsewhere",
        "all_elsewhere",
        "twice_to_recipient",
        "logged_by_another_contract",
    ],
)
async def test_a_receipt_moving_our_tokens_otherwise_keeps_the_hold_and_alerts(
    member: str,
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    """Neither confirmed (the receipt does not prove exactly the payout) nor failed (the
    hot wallet's tokens moved: releasing the hold would let the account spend money that
    left): the payout stays open with its hold, nothing is posted, and the critical alert
    `payouts.stalled` names it under `transfer_mismatch`."""
    logs = {
        "part_to_recipient_rest_elsewhere": lambda h, t, s: [(h, t, UNITS - 1), (h, s, 1)],
        "exact_and_more_elsewhere": lambda h, t, s: [(h, t, UNITS), (h, s, UNITS)],
        "all_elsewhere": lambda h, t, s: [(h, s, UNITS)],
        "twice_to_recipient": lambda h, t, s: [(h, t, UNITS), (h, t, UNITS)],
        "logged_by_another_contract": lambda h, t, s: [(h, t, UNITS)],
    }[member]
    row, account, _ = await _token_payout(
        anvil,
        pool,
        owner_pool,
        payout_settings,
        engine,
        logs,
        via_other_contract=member == "logged_by_another_contract",
    )
    assert (row["status"], row["receipt_status"]) == ("sent", 1)
    assert await _balances(pool, account) == (Decimal("50"), Decimal("5"))
    assert await ledger_rows(pool, account) == []
    sink = engine.alerts
    assert isinstance(sink, RecordingSink)
    fired = [f for f in sink.fired if f[0] == "payouts.stalled"]
    assert fired and fired[-1][1] is Severity.CRITICAL
    assert str(row["id"]) in fired[-1][3]["transfer_mismatch"]


async def test_a_native_payout_to_a_forwarding_contract_is_booked_as_mined(
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    """A contract recipient whose code forwards the value: the plain 21 000-gas transfer
    cannot run its code, so it reverts, nothing moves, the gas is charged; the value is
    never booked as paid."""
    (hot,) = engine.wallets
    await anvil.set_balance(hot, 10 * WEI)
    onward = fresh_address()
    contract = await puppet(anvil, fresh_address(), [], forward_to=onward)
    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    payout = await request_payout(pool, payout_settings, account, "1", contract)
    await settle_all(engine, anvil)
    row = await pool.fetchrow("SELECT * FROM payouts WHERE id = $1", payout["id"])
    assert (row["status"], row["receipt_status"]) == ("failed", 0)
    assert await anvil.rpc.get_balance(onward) == 0
    assert await anvil.rpc.get_balance(contract) == 0
    assert [r["event_type"] for r in await ledger_rows(pool, account)] == ["withdrawal_fee"]
    balance, held = await _balances(pool, account)
    assert held == 0 and balance == Decimal(5) - row["fee_paid"] and row["fee_paid"] > 0


@pytest.mark.parametrize("variant", ["checksummed_hot_wallet", "upper_case_token"])
async def test_a_sink_in_another_letter_case_is_still_refused(
    variant: str,
    anvil: AnvilNode,
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    payout_settings: Settings,
    engine: PayoutEngine,
) -> None:
    """The hold path compares addresses in one case whatever case its caller used (the API
    lowers them; an import or a script calling `place_payout` may not)."""
    from eth_utils import to_checksum_address

    from payflow.chain.payouts.holds import PayoutRefused

    account = await funded_account(owner_pool, "ETH", Decimal("5"))
    if variant == "checksummed_hot_wallet":
        (hot,) = engine.wallets
        to = to_checksum_address(hot)
    else:
        token = fresh_address()
        await owner_pool.execute(
            "INSERT INTO chain_tokens (chain, contract, asset, decimals)"
            " VALUES ($1, $2, 'USDC', 6)",
            CHAIN,
            token,
        )
        to = "0x" + token.removeprefix("0x").upper()
    with pytest.raises(PayoutRefused) as refused:
        await request_payout(pool, payout_settings, account, "1", to)
    assert refused.value.field == "body.to_address"
    assert await _balances(pool, account) == (Decimal("5"), Decimal(0))
