"""A property of the double-entry books on the real PostgreSQL: whatever sequence of
openings, deposits, reversals, payments, payouts (withdrawal + fee + the gas paid,
committed together) and operator adjustments (either sign, refused or not) is posted,
after every step the trial balance is zero per asset, no posting is unbalanced and every
account's balance equals its journal."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal

import asyncpg
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from payflow.config import Settings
from payflow.db.pool import create_pool
from payflow.db.tx import transaction
from payflow.errors import InsufficientFunds
from payflow.ledger.accounts import create_account, store_event
from payflow.ledger.moves import AdjustmentRefused, adjust, post_network_fee
from payflow.ledger.posting import post_event, post_within
from payflow.ledger.records import EventType
from tests.integration.ledger.books import assert_books_balance
from tests.integration.ledger.helpers import post_opening

AMOUNTS = st.decimals(min_value=Decimal("0.01"), max_value=Decimal(50), places=2)
ACCOUNT = st.integers(min_value=0, max_value=2)
STEP = st.one_of(
    st.tuples(st.just("open"), st.sampled_from(["ETH", "USDC"]), AMOUNTS | st.just(Decimal(0))),
    st.tuples(st.just("deposit"), ACCOUNT, AMOUNTS),
    st.tuples(st.just("airdrop"), ACCOUNT, AMOUNTS),
    st.tuples(st.just("reversal"), ACCOUNT, AMOUNTS),
    st.tuples(st.just("payment"), ACCOUNT, AMOUNTS),
    st.tuples(st.just("payout"), ACCOUNT, st.tuples(AMOUNTS, AMOUNTS)),
    st.tuples(st.just("adjust"), ACCOUNT, st.tuples(AMOUNTS, st.booleans())),
)

# One sequence with every kind of step, after an opening, so each movement is posted.
EVERY_KIND: list[tuple[object, ...]] = [
    ("open", "ETH", Decimal("20")),
    ("deposit", 0, Decimal("5")),
    ("airdrop", 0, Decimal("1")),
    ("reversal", 0, Decimal("2")),
    ("payment", 0, Decimal("7.5")),
    ("payout", 0, (Decimal("3"), Decimal("0.1"))),
    ("adjust", 0, (Decimal("0.5"), True)),
    ("adjust", 0, (Decimal("0.25"), False)),
]


async def _run(settings: Settings, steps: list[tuple[object, ...]]) -> None:
    pool = await create_pool(settings, min_size=1, max_size=2)
    try:
        crypto: list[uuid.UUID] = []
        async with pool.acquire() as conn, transaction(conn, settings):
            merchant = (await create_account(conn, "USD")).id
        for step in steps:
            kind, target, amount = step
            if kind == "open":
                assert isinstance(target, str) and isinstance(amount, Decimal)
                async with pool.acquire() as conn, transaction(conn, settings):
                    crypto.append((await create_account(conn, target)).id)
                if amount > 0:  # the operator's act
                    await post_opening(settings, crypto[-1], amount)
            elif kind == "payment":
                await _post(pool, settings, merchant, EventType.PAYMENT_CREDIT, amount)
            elif crypto:
                assert isinstance(target, int)
                account = crypto[target % len(crypto)]
                if kind == "payout":
                    assert isinstance(amount, tuple)
                    await _payout(pool, settings, account, *amount)
                elif kind == "adjust":
                    assert isinstance(amount, tuple)
                    await _adjust(pool, settings, account, *amount)
                else:
                    event_type = {
                        "deposit": EventType.DEPOSIT,
                        "airdrop": EventType.AIRDROP,
                        "reversal": EventType.DEPOSIT_REVERSAL,
                    }[str(kind)]
                    await _post(pool, settings, account, event_type, amount)
            await assert_books_balance(pool)
    finally:
        await pool.close()


async def _post(
    pool: asyncpg.Pool, settings: Settings, account: uuid.UUID, kind: EventType, amount: object
) -> None:
    assert isinstance(amount, Decimal)
    event_id = f"prop-{uuid.uuid4().hex}"
    async with pool.acquire() as conn, transaction(conn, settings):
        await store_event(
            conn, event_id=event_id, account_id=account, amount=amount, event_type=kind
        )
    await post_event(pool, settings, event_id)  # success or a recorded refusal


async def _payout(
    pool: asyncpg.Pool, settings: Settings, account: uuid.UUID, amount: Decimal, fee: Decimal
) -> None:
    base = f"prop-po-{uuid.uuid4().hex}"
    try:
        async with pool.acquire() as conn, transaction(conn, settings):
            for event_id, value, kind in (
                (base, amount, EventType.WITHDRAWAL),
                (base + "-fee", fee, EventType.WITHDRAWAL_FEE),
            ):
                await store_event(
                    conn, event_id=event_id, account_id=account, amount=value, event_type=kind
                )
                await post_within(conn, event_id)
            # the gas the transaction paid, payflow's expense (in ETH whatever the asset)
            await post_network_fee(conn, "ETH_MAINNET", "0x" + uuid.uuid4().hex * 2, 21_000 * 10**9)
    except InsufficientFunds:
        pass  # the whole payout rolled back: nothing of it is in the books


async def _adjust(
    pool: asyncpg.Pool, settings: Settings, account: uuid.UUID, amount: Decimal, credit: bool
) -> None:
    async with pool.acquire() as conn, transaction(conn, settings):
        asset = await conn.fetchval("SELECT asset FROM accounts WHERE id = $1", account)
    try:
        async with pool.acquire() as conn, transaction(conn, settings):
            await adjust(
                conn,
                str(account),
                amount if credit else -amount,
                against=f"adjustments:{asset}",
                reason="property",
                by="hypothesis",
                reference=f"prop-adj-{uuid.uuid4().hex}",
            )
    except AdjustmentRefused:
        pass  # below the held amount: nothing written


def _check(settings: Settings) -> None:
    @hypothesis_settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(steps=st.lists(STEP, min_size=1, max_size=12))
    @example(steps=EVERY_KIND)  # always run: every movement's legs at least once
    def prop(steps: list[tuple[object, ...]]) -> None:
        asyncio.run(_run(settings, steps))

    prop()


async def test_the_books_balance_after_every_step(pool: asyncpg.Pool, settings: Settings) -> None:
    await asyncio.to_thread(_check, settings)
    await assert_books_balance(pool)
    kinds = await pool.fetch("SELECT DISTINCT kind FROM ledger_legs")
    assert {"opening", "deposit", "payment_credit"} <= {r["kind"] for r in kinds}
    for account in await pool.fetch("SELECT balance, held FROM accounts"):
        assert account["balance"] >= account["held"] >= 0
