"""Chain deposits and payouts for the console's pages, made through the real code paths.

Accounts, deposit addresses and payout requests go through the HTTP API; deposits are
recorded by `observe` (as the scanner, which read the block itself, and as a provider
webhook), credited by the lifecycle's `credit`, orphaned and refuted by the lifecycle's
own statements; payouts are signed, sent, fee-bumped and settled by the real
`PayoutEngine` against `FakeNode`, a scripted stand-in for the few JSON-RPC answers it
needs (no node runs here). Only the scanner cursor is written directly.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import asyncpg
import httpx
from eth_account import Account
from eth_account.typed_transactions import TypedTransaction
from eth_utils.crypto import keccak
from hexbytes import HexBytes
from pydantic import SecretStr

from payflow.chain.deposits import SQL as CHAIN_SQL
from payflow.chain.deposits import observe
from payflow.chain.lifecycle import credit
from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.signer import HotWallet
from payflow.chain.transfers import NATIVE_POSITION, Transfer
from payflow.config import Settings
from payflow.db.tx import transaction

CHAIN = "ETH_MAINNET"
WEI = 10**18
SCRIPT = "<script>document.title='pwned'</script>"


class FakeNode:
    """The JSON-RPC answers `PayoutEngine` asks for, scripted: chain id 1, nonce 0, base
    fee 1 gwei, block 110 latest and final, a wallet balance, and the receipts a test
    puts in `receipts` (by tx hash). Broadcasts are accepted and remembered."""

    def __init__(self) -> None:
        self.balance = 100 * WEI
        self.receipts: dict[str, dict[str, Any]] = {}
        self.sent: list[str] = []
        self.raw: dict[str, str] = {}

    async def call(self, method: str, *params: Any) -> Any:
        if method == "eth_getTransactionByHash":  # what a broadcast transaction carries
            raw = self.raw.get(params[0])
            if raw is None:
                return None
            tx = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
            return {
                "hash": params[0],
                "from": Account.recover_transaction(raw).lower(),
                "to": str(tx["to"]).lower()
                if isinstance(tx["to"], str)
                else "0x" + bytes(tx["to"]).hex(),
                "value": hex(int(tx["value"])),
            }
        answers = {"eth_chainId": "0x1", "eth_getTransactionCount": "0x0"}
        return answers[method]

    async def get_block(self, tag: int | str, *, full: bool = False) -> dict[str, Any]:
        return {"number": hex(110), "baseFeePerGas": hex(10**9), "hash": "0x" + "11" * 32}

    async def get_balance(self, address: str, tag: int | str = "latest") -> int:
        return self.balance

    async def send_raw_transaction(self, raw: str) -> str:
        tx_hash = "0x" + keccak(hexstr=raw).hex()
        self.sent.append(tx_hash)
        self.raw[tx_hash] = raw
        return tx_hash

    async def batch(self, calls: list[tuple[str, list[Any]]]) -> list[Any]:
        return [self.receipts.get(params[0]) for _method, params in calls]


@dataclass
class ChainWorld:
    """What `seed_chain` made: ids of each kind of row, by owner."""

    shop_account: UUID
    other_account: UUID
    awaiting: str  # shop's deposit awaiting finality (verified)
    credited: str  # shop's credited deposit
    orphaned: str  # shop's orphaned deposit
    others_deposit: str  # the other merchant's deposit awaiting finality
    awaiting_tx: str
    confirmed_payout: UUID  # two attempts (a fee bump), confirmed, fee paid
    stuck_payout: UUID  # sent, bumped every run, no receipt
    waiting_payout: UUID  # held: the hot wallet is too poor
    others_payout: UUID
    wallet: str
    node: FakeNode = field(repr=False, default_factory=FakeNode)


def _tx() -> str:
    return "0x" + secrets.token_hex(32)


async def _account(api: httpx.AsyncClient, key: str, admin_key: str) -> tuple[UUID, str]:
    made = await api.post("/api/v1/accounts", json={"asset": "ETH"}, headers={"X-API-Key": key})
    assert made.status_code == 201, made.text
    account = UUID(made.json()["account_id"])
    address = "0x" + secrets.token_hex(20)
    assigned = await api.post(
        f"/api/v1/accounts/{account}/deposit-addresses",
        json={"chain": CHAIN, "address": address},
        headers={"X-API-Key": admin_key},
    )
    assert assigned.status_code == 201, assigned.text
    return account, address


async def _scanned(
    pool: asyncpg.Pool, settings: Settings, to: str, units: int, block: int, tx: str | None = None
) -> str:
    """A native transfer the scanner saw in `block`: recorded verified at once."""
    transfer = Transfer(CHAIN, tx or _tx(), NATIVE_POSITION, to, None, units)
    async with pool.acquire() as conn, transaction(conn, settings):
        seen = await observe(
            conn,
            transfer,
            source="scanner",
            trace_id=uuid.uuid4().hex,
            seen_in_block=(block, "0x" + f"{block:064x}"),
        )
    assert seen.transfer_id is not None, seen
    return seen.transfer_id


async def _payout(api: httpx.AsyncClient, key: str, account: UUID, amount: str) -> UUID:
    made = await api.post(
        f"/api/v1/accounts/{account}/withdrawals",
        json={"amount": amount, "to_address": Account.create().address.lower()},
        headers={"X-API-Key": key, "Idempotency-Key": uuid.uuid4().hex},
    )
    assert made.status_code == 202, made.text
    return UUID(made.json()["payout_id"])


async def seed_chain(
    pool: asyncpg.Pool,
    settings: Settings,
    api: httpx.AsyncClient,
    *,
    shop_key: str,
    other_key: str,
    admin_key: str,
) -> ChainWorld:
    """Deposits in every state and payouts in several for `shop`, one of each for `other`."""
    shop_account, shop_address = await _account(api, shop_key, admin_key)
    other_account, other_address = await _account(api, other_key, admin_key)

    # Credited: seen by the scanner, then final (the lifecycle's credit: CAS + event + post).
    credited = await _scanned(pool, settings, shop_address, 10 * WEI, 90)
    other_credit = await _scanned(pool, settings, other_address, 5 * WEI, 91)
    for tid in (credited, other_credit):
        row = await pool.fetchrow(
            "SELECT transfer_id, block_hash FROM chain_deposits WHERE transfer_id = $1", tid
        )
        assert await credit(pool, settings, row)

    # Awaiting finality, also reported by a webhook (pending: no node checks it here), and a
    # webhook claim of another amount in the same transaction, refuted with its reason.
    awaiting_tx = _tx()
    awaiting = await _scanned(pool, settings, shop_address, 3 * WEI // 2, 100, awaiting_tx)
    async with pool.acquire() as conn, transaction(conn, settings):
        same = Transfer(CHAIN, awaiting_tx, NATIVE_POSITION, shop_address, None, 3 * WEI // 2)
        await observe(conn, same, source="webhook", trace_id="t1", provider_event_id="gen:ok-1")
        wrong = Transfer(CHAIN, awaiting_tx, NATIVE_POSITION, shop_address, None, 2 * WEI)
        refuted = await observe(
            conn, wrong, source="webhook", trace_id="t2", provider_event_id=f"gen:{SCRIPT}"
        )
        await conn.execute(
            CHAIN_SQL["refute_report"], refuted.report_id, f"another amount {SCRIPT}"
        )

    # Orphaned: its block was replaced before it was final (the lifecycle's statement).
    orphaned = await _scanned(pool, settings, shop_address, WEI // 4, 101)
    await pool.execute(CHAIN_SQL["mark_orphaned"], orphaned, 3600.0)
    others_deposit = await _scanned(pool, settings, other_address, 3 * WEI // 4, 102)
    await pool.execute(
        "INSERT INTO chain_scanner_cursors (chain, block_number, block_hash) VALUES ($1, 110, $2)"
        " ON CONFLICT (chain) DO UPDATE SET block_number = 110, block_hash = $2",
        CHAIN,
        "0x" + "11" * 32,
    )

    # Payouts through the API, then the engine: sign, send, bump (stuck after 0 s).
    node = FakeNode()
    wallet = HotWallet(SecretStr("0x" + bytes(Account.create().key).hex()))
    engine = PayoutEngine(
        pool,
        settings.model_copy(update={"payout_stuck_after_s": 0.0}),
        node,  # type: ignore[arg-type]
        [wallet],
        database=settings.model_copy(update={"payout_stuck_after_s": 0.0}),
        chains=settings.model_copy(update={"payout_stuck_after_s": 0.0}),
    )
    confirmed = await _payout(api, shop_key, shop_account, "1")
    stuck = await _payout(api, shop_key, shop_account, "0.5")
    await engine.tick()  # both signed, sent, and bumped once (no receipt, stuck at once)
    bumped = await pool.fetchval(
        "SELECT tx_hash FROM payout_txs WHERE payout_id = $1 AND attempt = 2", confirmed
    )
    node.receipts[bumped] = {
        "transactionHash": bumped,
        "status": "0x1",
        "blockNumber": hex(105),
        "blockHash": "0x" + "22" * 32,
        "gasUsed": hex(21_000),
        "effectiveGasPrice": hex(2 * 10**9),
    }
    await engine.tick()  # the bump landed and is final: confirmed; the other bumped again
    waiting = await _payout(api, shop_key, shop_account, "0.1")
    others = await _payout(api, other_key, other_account, "1")
    node.balance = 0
    await engine.tick()  # the wallet cannot pay: both wait
    return ChainWorld(
        shop_account=shop_account,
        other_account=other_account,
        awaiting=awaiting,
        credited=credited,
        orphaned=orphaned,
        others_deposit=others_deposit,
        awaiting_tx=awaiting_tx,
        confirmed_payout=confirmed,
        stuck_payout=stuck,
        waiting_payout=waiting,
        others_payout=others,
        wallet=wallet.address,
        node=node,
    )
