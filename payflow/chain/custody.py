"""Custody against the chain, by balances: `payflow recon --chain` and the `recon_chain` job.

Per chain and asset, the custody account `custody:<chain>:<asset>` must equal what the
chain holds at payflow's deposit addresses and hot wallets at the chain's final height
(`FinalityOracle.finalized_height`), read with `eth_getBalance` and ERC-20 `balanceOf`
at that block number in JSON-RPC batches, after the node's chain id is checked
(`check_node`). Comparing balances, not lists of transfers, catches what no transfer
list shows: ETH pushed by a contract's internal call or a self-destruct, a deposit whose
credit a deep reorg reversed while the same transaction is final again, a payout booked
as paid whose tokens never left the hot wallet.

`expected chain = books + in flight`, `difference = chain - expected`; in flight is:
- deposits the chain holds in a final block that are not credited yet (`verified`), minus
  credits whose block is above the final height;
- payouts signed or sent but not settled whose transaction is mined in a final block with
  status 1: their amount has left the chain, not yet the books (minus);
- gas the hot wallets paid for payout transactions final on chain (native asset, minus),
  less what the books already carry in `network_fees:<chain>:<native>`.

Before comparing, the window's movements between our addresses and the registered
treasury addresses (`treasury_addresses`) are booked as movements between custody and
treasury accounts (`treasury_sweep`: custody -> treasury, `treasury_funding`: treasury ->
custody), once per `<tx hash>:<log index>` (`-1`: native value): ERC-20 `Transfer` logs
(`eth_getLogs`) and native value from the block bodies; the gas a deposit address paid
for the owners' transaction is booked `sweep_gas` (custody -> network_fees). An outflow
from our addresses to any other address that is not a payout's own transaction is listed
(`unexplained_outflows`) and makes the report dirty. Value a contract moves by an internal
call has no transaction of ours: it shows as a difference only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import asyncpg

from payflow.chain.deposits import SQL
from payflow.chain.finality import FinalityOracle
from payflow.chain.identity import check_node
from payflow.chain.rpc import RpcClient, hex_int, to_hex
from payflow.chain.transfers import NATIVE_POSITION, TRANSFER_TOPIC
from payflow.chain.watch.blocks import BODY_BATCH, address_topic, read_headers
from payflow.config import ChainSettings
from payflow.money import format_amount, from_base_units

BALANCE_OF = "0x70a08231"
BATCH = 100
SHOWN = 20


@dataclass(slots=True)
class CustodyLine:
    """One asset of one chain: books, chain, in flight and what explains a difference."""

    chain: str
    asset: str
    account: str
    books: Decimal = Decimal(0)
    on_chain: Decimal = Decimal(0)
    in_flight: Decimal = Decimal(0)
    explanations: list[str] = field(default_factory=list)

    @property
    def difference(self) -> Decimal:
        return self.on_chain - (self.books + self.in_flight)

    @property
    def clean(self) -> bool:
        return self.difference == 0

    def summary(self) -> str:
        return (
            f"custody {self.account} books={format_amount(self.books)} "
            f"chain={format_amount(self.on_chain)} in_flight={format_amount(self.in_flight)} "
            f"difference={format_amount(self.difference)} "
            f"result={'clean' if self.clean else 'MISMATCH'}"
        )


@dataclass(slots=True)
class CustodyReport:
    chain: str
    block: int
    from_block: int
    lines: list[CustodyLine] = field(default_factory=list)
    booked_movements: list[str] = field(default_factory=list)  # "<kind> <reference> …"
    unexplained_outflows: list[str] = field(default_factory=list)  # "<tx>:<log> to … units"

    @property
    def clean(self) -> bool:
        return all(line.clean for line in self.lines) and not self.unexplained_outflows

    @property
    def mismatches(self) -> list[CustodyLine]:
        return [line for line in self.lines if not line.clean]


async def _batch(
    oracle: FinalityOracle, chain: str, calls: list[tuple[str, list[Any]]]
) -> list[Any]:
    results: list[Any] = []
    for start in range(0, len(calls), BATCH):
        part = calls[start : start + BATCH]

        async def ask(rpc: RpcClient, part: list[tuple[str, list[Any]]] = part) -> list[Any]:
            return await rpc.batch(part)

        results.extend(await oracle.call(chain, ask))
    return results


async def _logs(
    oracle: FinalityOracle,
    settings: ChainSettings,
    chain: str,
    span: tuple[int, int],
    tokens: list[str],
    topics: list[Any],
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if not tokens:
        return found
    step = settings.recon_chain_block_span
    for start in range(span[0], span[1] + 1, step):
        end = min(start + step - 1, span[1])

        async def ask(rpc: RpcClient, start: int = start, end: int = end) -> list[Any]:
            return await rpc.get_logs(start, end, address=tokens, topics=topics)

        found.extend(await oracle.call(chain, ask))
    return found


def _topic_address(topic: str) -> str:
    return "0x" + topic[-40:].lower()


async def reconcile_custody(
    pool: asyncpg.Pool,
    settings: ChainSettings,
    oracle: FinalityOracle,
    chain: str,
    *,
    from_block: int | None = None,
) -> CustodyReport:
    """Book the treasury movements of the window, then compare each custody account of
    `chain` with the chain's balances at the final height. Raises `ChainUnavailable`,
    `NodeMisconfigured` or a `RetryableError` of the read."""
    await check_node(pool, oracle, chain)
    final = await oracle.finalized_height(chain)
    start = max(
        0, from_block if from_block is not None else final - settings.recon_chain_window_blocks + 1
    )
    report = CustodyReport(chain, final, start)
    async with pool.acquire() as conn:
        assets = await conn.fetch(SQL["custody_assets"], chain)
        holders = [r["address"] for r in await conn.fetch(SQL["custody_holders"], chain)]
        treasury = {r["address"] for r in await conn.fetch(SQL["treasury_active"], chain)}
        payouts = await conn.fetch(SQL["custody_payouts"], chain)
    evm = [a for a in holders if a.startswith("0x") and len(a) == 42]
    ours = set(evm)
    by_contract = {r["contract"]: r for r in assets if r["contract"] is not None}
    payout_txs = {h for p in payouts for h in p["tx_hashes"]}
    native_row = next((r for r in assets if r["contract"] is None), None)
    if native_row is None:  # a chain payflow does not register: nothing to compare
        return report
    deposit_addresses = {r["address"] for r in await pool.fetch(SQL["our_addresses"], chain)}
    if final >= start:
        await _treasury_movements(
            pool,
            settings,
            oracle,
            report,
            (start, final),
            by_contract,
            evm,
            ours,
            treasury,
            payout_txs,
        )
        await _native_movements(
            pool,
            oracle,
            report,
            (start, final),
            native_row,
            ours,
            deposit_addresses,
            treasury,
            payout_txs,
        )

    # balances at the final height
    calls: list[tuple[str, list[Any]]] = []
    for row in assets:
        for holder in evm:
            if row["contract"] is None:
                calls.append(("eth_getBalance", [holder, to_hex(final)]))
            else:
                data = BALANCE_OF + address_topic(holder)[2:]
                calls.append(("eth_call", [{"to": row["contract"], "data": data}, to_hex(final)]))
    answers = await _batch(oracle, chain, calls)
    held: dict[str, int] = {}
    for i, row in enumerate(assets):
        units = 0
        for j in range(len(evm)):
            raw = answers[i * len(evm) + j]
            units += (hex_int(raw) or 0) if raw not in (None, "0x") else 0
        held[row["asset"]] = held.get(row["asset"], 0) + units

    receipts = await _receipts(oracle, chain, sorted(payout_txs))
    native = native_row
    async with pool.acquire() as conn:
        in_flight = {
            r["asset"]: (r["amount"], r["transfers"] or [])
            for r in await conn.fetch(SQL["custody_deposits_in_flight"], chain, final)
        }
        reversed_deposits = await conn.fetch(SQL["custody_reversed_deposits"], chain)
        lines: dict[str, CustodyLine] = {}
        for row in assets:
            asset = row["asset"]
            if asset in lines:
                continue
            line = CustodyLine(chain, asset, f"custody:{chain}:{asset}")
            line.books = await conn.fetchval(SQL["custody_book_balance"], line.account)
            line.on_chain = from_base_units(held[asset], int(row["decimals"]))
            amount, transfers = in_flight.get(asset, (Decimal(0), []))
            line.in_flight = amount
            line.explanations += [f"deposit in flight (not credited yet): {t}" for t in transfers]
            lines[asset] = line
        booked_gas = await conn.fetchval(
            SQL["custody_booked_payout_gas"], f"network_fees:{chain}:{native['asset']}"
        )
    gas_wei = 0
    for payout in payouts:
        mined = [receipts[h] for h in payout["tx_hashes"] if _final_receipt(receipts.get(h), final)]
        for receipt in mined:
            gas_wei += _gas_wei(receipt)
        found = lines.get(payout["asset"])
        if found is None:
            continue
        line = found
        landed_ok = [r for r in mined if hex_int(r.get("status")) == 1]
        if payout["status"] in ("signed", "sent") and landed_ok:
            line.in_flight -= payout["amount"]
            line.explanations.append(f"payout in flight (mined, not settled): {payout['id']}")
        if payout["status"] == "confirmed" and payout["contract"] is not None:
            moved = any(_moves_out(r, payout["contract"], payout["hot_wallet"]) for r in landed_ok)
            if not moved:
                line.explanations.append(
                    f"payout booked as paid whose tokens never left {payout['hot_wallet']}:"
                    f" {payout['id']} (tx {payout['landed_tx_hash']})"
                )
    gas = from_base_units(gas_wei, int(native["decimals"])) - booked_gas
    if gas:
        native_line = lines[native["asset"]]
        native_line.in_flight -= gas
        native_line.explanations.append(
            f"gas paid by hot wallets, not booked: {format_amount(gas)}"
        )
    await _explain_reversed(oracle, chain, final, reversed_deposits, lines)
    for outflow in report.unexplained_outflows:
        for line in lines.values():
            if outflow.endswith(f" {line.asset}"):
                line.explanations.append(f"outflow to an unregistered address: {outflow}")
    for line in lines.values():
        if not line.clean and not line.explanations:
            line.explanations.append(
                "no known transfer explains it: value reached or left our addresses without"
                " a transfer payflow reads (a contract's internal call, a self-destruct, a"
                " native sweep, a wallet funded outside the books)"
            )
    report.lines = list(lines.values())
    return report


def _final_receipt(receipt: dict[str, Any] | None, final: int) -> bool:
    if receipt is None:
        return False
    number = hex_int(receipt.get("blockNumber"))
    return number is not None and number <= final


def _gas_wei(receipt: dict[str, Any]) -> int:
    used = hex_int(receipt.get("gasUsed")) or 0
    price = hex_int(receipt.get("effectiveGasPrice")) or 0
    return used * price


def _moves_out(receipt: dict[str, Any], contract: str, hot_wallet: str | None) -> bool:
    for log in receipt.get("logs", []):
        topics = [str(t).lower() for t in log.get("topics", [])]
        if (
            str(log.get("address", "")).lower() == contract
            and len(topics) == 3
            and topics[0] == TRANSFER_TOPIC
            and hot_wallet is not None
            and _topic_address(topics[1]) == hot_wallet
            and (hex_int(log.get("data")) or 0) > 0
        ):
            return True
    return False


async def _receipts(
    oracle: FinalityOracle, chain: str, hashes: list[str]
) -> dict[str, dict[str, Any]]:
    answers = await _batch(oracle, chain, [("eth_getTransactionReceipt", [h]) for h in hashes])
    return {h: r for h, r in zip(hashes, answers, strict=True) if r is not None}


async def _explain_reversed(
    oracle: FinalityOracle,
    chain: str,
    final: int,
    rows: list[asyncpg.Record],
    lines: dict[str, CustodyLine],
) -> None:
    """A deposit reversed by a reorg whose transaction is final on chain again."""
    receipts = await _receipts(oracle, chain, sorted({r["tx_hash"] for r in rows}))
    for row in rows:
        receipt = receipts.get(row["tx_hash"])
        if _final_receipt(receipt, final) and receipt is not None:
            if hex_int(receipt.get("status")) == 1 and row["asset"] in lines:
                lines[row["asset"]].explanations.append(
                    f"deposit reversed by a reorg, final on chain again: {row['transfer_id']}"
                    f" ({format_amount(row['amount'])})"
                )


async def _treasury_movements(
    pool: asyncpg.Pool,
    settings: ChainSettings,
    oracle: FinalityOracle,
    report: CustodyReport,
    span: tuple[int, int],
    by_contract: dict[str, asyncpg.Record],
    evm: list[str],
    ours: set[str],
    treasury: set[str],
    payout_txs: set[str],
) -> None:
    """Book token movements between our addresses and treasury addresses; list token
    outflows to anywhere else (payouts' own transactions excepted)."""
    tokens = sorted(by_contract)
    batch = settings.recon_chain_address_batch
    found: list[dict[str, Any]] = []
    for i in range(0, len(evm), batch):
        topics = [TRANSFER_TOPIC, [address_topic(a) for a in evm[i : i + batch]]]
        found += await _logs(oracle, settings, report.chain, span, tokens, topics)
    if treasury:
        topics = [TRANSFER_TOPIC, [address_topic(a) for a in sorted(treasury)]]
        found += [
            log
            for log in await _logs(oracle, settings, report.chain, span, tokens, topics)
            if len(log.get("topics", [])) == 3 and _topic_address(str(log["topics"][2])) in ours
        ]
    async with pool.acquire() as conn:
        for log in found:
            seen = [str(t).lower() for t in log.get("topics", [])]
            if len(seen) != 3 or seen[0] != TRANSFER_TOPIC or log.get("removed"):
                continue
            sender, to = _topic_address(seen[1]), _topic_address(seen[2])
            tx = str(log["transactionHash"]).lower()
            index = hex_int(log.get("logIndex"))
            token = by_contract[str(log["address"]).lower()]
            amount = from_base_units(hex_int(log.get("data")) or 0, int(token["decimals"]))
            reference = f"{tx}:{index}"
            custody = f"custody:{report.chain}:{token['asset']}"
            vault = f"treasury:{report.chain}:{token['asset']}"
            if amount <= 0 or (sender in ours and to in ours):
                continue
            if sender in ours and to in treasury:
                kind, debit, credit = "treasury_sweep", vault, custody
            elif sender in treasury and to in ours:
                kind, debit, credit = "treasury_funding", custody, vault
            elif tx in payout_txs:
                continue
            else:
                report.unexplained_outflows.append(
                    f"{reference} from {sender} to {to} {format_amount(amount)} {token['asset']}"
                )
                continue
            async with conn.transaction():
                posted = await conn.fetchval(
                    SQL["treasury_post"], kind, reference, debit, credit, amount
                )
            if posted is not None:
                report.booked_movements.append(
                    f"{kind} {reference} {format_amount(amount)} {token['asset']}"
                )


async def _native_movements(
    pool: asyncpg.Pool,
    oracle: FinalityOracle,
    report: CustodyReport,
    span: tuple[int, int],
    native: asyncpg.Record,
    ours: set[str],
    deposit_addresses: set[str],
    treasury: set[str],
    payout_txs: set[str],
) -> None:
    """Walk the window's block bodies for native value between our addresses and the
    treasury (booked as sweeps and fundings), native value from ours to anywhere else
    (an unexplained outflow) and the gas our deposit addresses paid for the owners'
    transactions (booked `sweep_gas`: custody -> network_fees). Only transactions whose
    receipt has status 1 move value; every mined one paid its gas."""
    matched: list[tuple[str, str, str | None, int]] = []  # tx, from, to, value
    numbers = list(range(span[0], span[1] + 1))
    for i in range(0, len(numbers), BODY_BATCH):

        async def ask(rpc: RpcClient, part: list[int] = numbers[i : i + BODY_BATCH]) -> Any:
            return await read_headers(rpc_call(rpc), part, full=True)

        for block in await oracle.call(report.chain, ask):
            for tx in (block or {}).get("transactions", []):
                if not isinstance(tx, dict):
                    continue
                sender = str(tx.get("from") or "").lower()
                to = (tx.get("to") or "").lower() or None
                if sender in ours or (sender in treasury and to in ours):
                    matched.append(
                        (str(tx["hash"]).lower(), sender, to, hex_int(tx.get("value")) or 0)
                    )
    if not matched:
        return
    receipts = await _receipts(oracle, report.chain, sorted({m[0] for m in matched}))
    decimals = int(native["decimals"])
    custody = f"custody:{report.chain}:{native['asset']}"
    vault = f"treasury:{report.chain}:{native['asset']}"
    fees = f"network_fees:{report.chain}:{native['asset']}"
    async with pool.acquire() as conn:
        for tx, sender, to, value in matched:
            receipt = receipts.get(tx)
            if receipt is None or tx in payout_txs:
                continue
            postings: list[tuple[str, str, str, str, int]] = []
            if sender in deposit_addresses:
                postings.append(("sweep_gas", f"{tx}:gas", fees, custody, _gas_wei(receipt)))
            moved = value if hex_int(receipt.get("status")) == 1 else 0
            reference = f"{tx}:{NATIVE_POSITION}"
            if moved and sender in ours and to in treasury:
                postings.append(("treasury_sweep", reference, vault, custody, moved))
            elif moved and sender in treasury and to in ours:
                postings.append(("treasury_funding", reference, custody, vault, moved))
            elif moved and sender in ours and to not in ours:
                amount = format_amount(from_base_units(moved, decimals))
                report.unexplained_outflows.append(
                    f"{reference} from {sender} to {to or 'a new contract'} {amount}"
                    f" {native['asset']}"
                )
            for kind, ref, debit, credit, wei in postings:
                if wei <= 0:
                    continue
                amount_d = from_base_units(wei, decimals)
                async with conn.transaction():
                    posted = await conn.fetchval(
                        SQL["treasury_post"], kind, ref, debit, credit, amount_d
                    )
                if posted is not None:
                    report.booked_movements.append(
                        f"{kind} {ref} {format_amount(amount_d)} {native['asset']}"
                    )


def rpc_call(rpc: RpcClient) -> Any:
    """`read_headers`' `call` on one client (the oracle already holds the breaker)."""

    async def call(fn: Any) -> Any:
        return await fn(rpc)

    return call
