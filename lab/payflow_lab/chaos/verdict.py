"""The checks after the drain: nothing lost, nothing duplicated, balances equal to the
model, reconciliation clean, every webhook delivered or dead-lettered (never both),
every dead letter explained by an injected fault.

The model is independent of the service: a payment's outcome is the gateway's decision
(`EmulatedGateway.decide`, a pure function of the seed and the payment id, as a real
gateway's answer is an outside fact), a deposit (a native ETH transfer on the run's
anvil, reported by the provider webhook) is credited once: one confirmed payment event
`chain:ETH_MAINNET:<txhash>:-1`, one balance_events row for it and its `chain_deposits`
row `credited` with that event; a withdrawal
larger than every deposit its account ever gets must fail `insufficient_funds`, and an
account's balance is its deposits minus its confirmed withdrawals. The readings come
from PostgreSQL (a direct connection, not through the proxies) and the gateway
emulator's Redis memory (`charge_count`).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from uuid import UUID

import asyncpg
from redis.asyncio import Redis

from payflow.chain.lifecycle import credit_event_id
from payflow.chain.transfers import NATIVE_POSITION, transfer_id
from payflow.money import EXACT
from payflow.payments.gateway import EmulatedGateway
from payflow_lab.chaos.faults import Window
from payflow_lab.chaos.load import Op, Plan

DEPOSIT_CHAIN = "ETH_MAINNET"
DLQ_SLACK_S = 60.0  # retry tiers (7 s), leases, sweeps and the fallback drain after a fault


@dataclass
class Verdict:
    """Counts of every kind of failure (all zero for exactly_once) and the figures."""

    lost: int = 0
    duplicated: int = 0
    refused: int = 0
    wrong_outcome: int = 0
    balance_mismatches: int = 0
    webhook_both: int = 0
    webhook_wrong: int = 0
    dlq_rows: int = 0
    dlq_unexplained: int = 0
    # Merchant events whose delivery to the merchant's endpoint did not end delivered, and
    # those whose webhook-id the endpoint never received.
    endpoint_undelivered: int = 0
    endpoint_unseen: int = 0
    endpoint_events: int = 0
    recon_clean: bool = False
    notes: list[str] = field(default_factory=list)
    dlq_by_source: Counter[str] = field(default_factory=Counter)
    # DLQ rows per dead-lettered webhook (payment id): one each since migration 0018
    dlq_per_webhook: Counter[str] = field(default_factory=Counter)

    @property
    def exactly_once(self) -> bool:
        return self.recon_clean and not any(
            (
                self.lost,
                self.duplicated,
                self.refused,
                self.wrong_outcome,
                self.balance_mismatches,
                self.webhook_both,
                self.webhook_wrong,
                self.dlq_unexplained,
                self.endpoint_undelivered,
                self.endpoint_unseen,
            )
        )

    def note(self, text: str) -> None:
        if len(self.notes) < 20:
            self.notes.append(text)


def deposit_transfer_id(op: Op) -> str:
    """The chain transfer id of a deposit's native transfer (`<chain>:<txhash>:-1`);
    "" when its transfer was never sent."""
    if op.tx_hash is None:
        return ""
    return transfer_id(DEPOSIT_CHAIN, op.tx_hash, NATIVE_POSITION)


def deposit_event_id(op: Op) -> str:
    """The payment event id of a deposit's credit (`chain:<transfer id>`)."""
    return credit_event_id(deposit_transfer_id(op))


async def open_work(conn: asyncpg.Connection, plan: Plan) -> int:
    """What is still moving: answered payments not terminal or with an unsettled webhook,
    open payment events, chain deposits not yet credited, provider reports not yet
    decided, endpoint deliveries still pending and unpublished outbox rows (0: the run
    is quiet)."""
    payment_ids = [UUID(op.result["payment_id"]) for op in plan.of("payment") if op.result]
    open_payments: int = await conn.fetchval(
        "SELECT count(*) FROM payments WHERE id = ANY($1::uuid[]) AND (status = 'pending'"
        " OR (webhook_url IS NOT NULL AND webhook_delivered_at IS NULL"
        "     AND webhook_dead_at IS NULL))",
        payment_ids,
    )
    open_events: int = await conn.fetchval(
        "SELECT count(*) FROM payment_events WHERE status NOT IN ('confirmed', 'failed')"
    )
    unpublished: int = await conn.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL")
    uncredited: int = await conn.fetchval(
        "SELECT (SELECT count(*) FROM chain_deposits WHERE status <> 'credited')"
        " + (SELECT count(*) FROM chain_deposit_reports WHERE status = 'pending')"
        " + (SELECT count(*) FROM webhook_deliveries WHERE state = 'pending')"
    )
    return open_payments + open_events + unpublished + uncredited


async def _endpoint_deliveries(
    conn: asyncpg.Connection, endpoint_ids: Counter[str], verdict: Verdict
) -> None:
    """Every merchant event reached the merchant's endpoint (it wants every type and
    always answers 200): its delivery ended delivered, and its id came as a webhook-id."""
    rows = await conn.fetch(
        "SELECT ev.id, ev.type, d.state FROM merchant_events ev"
        " LEFT JOIN webhook_deliveries d ON d.event_id = ev.id ORDER BY ev.created_at"
    )
    verdict.endpoint_events = len(rows)
    for row in rows:
        if row["state"] != "delivered":
            verdict.endpoint_undelivered += 1
            verdict.note(f"event {row['id']} ({row['type']}): delivery {row['state']}")
        if endpoint_ids[row["id"]] == 0:
            verdict.endpoint_unseen += 1
            verdict.note(f"event {row['id']} ({row['type']}) never reached the endpoint")


async def _payments(
    conn: asyncpg.Connection, plan: Plan, gateway: EmulatedGateway, verdict: Verdict
) -> Decimal:
    """Payment checks; returns the model's merchant USD balance (approved amounts)."""
    ops = [op for op in plan.of("payment") if op.result]
    ids = [UUID(op.result["payment_id"]) for op in ops if op.result]
    rows = {
        r["id"]: r
        for r in await conn.fetch(
            "SELECT id, idempotency_key, amount, status, webhook_url, webhook_delivered_at,"
            " webhook_dead_at FROM payments WHERE id = ANY($1::uuid[])",
            ids,
        )
    }
    total = await conn.fetchval("SELECT count(*) FROM payments")
    if total != len(plan.of("payment")):  # more rows than keys: a duplicate; fewer: lost below
        verdict.duplicated += max(0, total - len(plan.of("payment")))
        verdict.note(f"payments rows {total} for {len(plan.of('payment'))} keys")
    expected = Decimal(0)
    for op in ops:
        assert op.result is not None
        pid = UUID(op.result["payment_id"])
        row = rows.get(pid)
        if row is None or row["status"] == "pending":
            verdict.lost += 1
            verdict.note(f"payment {op.key} not terminal")
            continue
        approved = gateway.decide(pid).approved
        if row["status"] != ("succeeded" if approved else "failed") or row["amount"] != op.amount:
            verdict.wrong_outcome += 1
            verdict.note(f"payment {op.key}: {row['status']}, gateway approved={approved}")
        if approved:
            expected = EXACT.add(expected, op.amount)
        count = await gateway.charge_count(pid)
        if count != 1:
            verdict.duplicated += count > 1
            verdict.lost += count == 0
            verdict.note(f"payment {op.key}: {count} gateway charges")
        delivered, dead = row["webhook_delivered_at"], row["webhook_dead_at"]
        if delivered is not None and dead is not None:
            verdict.webhook_both += 1
        elif op.mode is None:
            verdict.webhook_wrong += delivered is not None or dead is not None
        elif (op.mode == "dead") != (dead is not None) or (delivered is None and dead is None):
            verdict.webhook_wrong += 1
            verdict.note(f"payment {op.key}: mode {op.mode}, delivered={delivered} dead={dead}")
    return expected


async def _events(conn: asyncpg.Connection, plan: Plan, verdict: Verdict) -> dict[int, Decimal]:
    """Deposit and withdrawal checks; returns the model's balance per account index."""
    expected: dict[int, Decimal] = {}
    deposits = [op for op in plan.of("deposit") if op.result]
    withdrawals = [op for op in plan.of("withdrawal") if op.result]
    ids = [deposit_event_id(op) for op in deposits]
    ids += [op.result["event_id"] for op in withdrawals if op.result]
    rows = {
        r["event_id"]: r
        for r in await conn.fetch(
            "SELECT e.event_id, e.status, e.amount, p.outcome,"
            " (SELECT count(*) FROM balance_events b WHERE b.source_event_id = e.event_id) AS n"
            " FROM payment_events e LEFT JOIN processed_events p ON p.event_id = e.event_id"
            " WHERE e.event_id = ANY($1::text[])",
            ids,
        )
    }
    deposit_rows = await conn.fetchval(
        "SELECT count(*) FROM payment_events WHERE event_type = 'deposit'"
    )
    if deposit_rows != len(plan.of("deposit")):
        verdict.duplicated += max(0, deposit_rows - len(plan.of("deposit")))
        verdict.note(f"deposit events {deposit_rows} for {len(plan.of('deposit'))} deposits")
    chain_rows = {
        r["transfer_id"]: r
        for r in await conn.fetch(
            "SELECT transfer_id, status, credit_event_id FROM chain_deposits"
            " WHERE transfer_id = ANY($1::text[])",
            [deposit_transfer_id(op) for op in deposits],
        )
    }
    for op in deposits:
        row = rows.get(deposit_event_id(op))
        if row is None or row["status"] != "confirmed":
            verdict.lost += 1
            verdict.note(f"deposit {op.key} ({op.tx_hash}) not confirmed")
            continue
        verdict.duplicated += row["n"] > 1
        verdict.lost += row["n"] == 0
        chain_row = chain_rows.get(deposit_transfer_id(op))
        if chain_row is None or (chain_row["status"], chain_row["credit_event_id"]) != (
            "credited",
            deposit_event_id(op),
        ):
            verdict.wrong_outcome += 1
            verdict.note(f"deposit {op.key}: chain_deposits row {chain_row and dict(chain_row)}")
        expected[op.account] = EXACT.add(expected.get(op.account, Decimal(0)), op.amount)
    for op in withdrawals:
        assert op.result is not None
        row = rows.get(op.result["event_id"])
        if row is None or row["status"] not in ("confirmed", "failed"):
            verdict.lost += 1
            verdict.note(f"withdrawal {op.key} not terminal")
            continue
        verdict.duplicated += row["n"] > 1
        if row["status"] == "confirmed":
            if op.must_fail or row["n"] != 1:
                verdict.wrong_outcome += 1
            expected[op.account] = EXACT.subtract(expected.get(op.account, Decimal(0)), op.amount)
        elif row["outcome"] != "insufficient_funds" or row["n"] != 0:
            verdict.wrong_outcome += 1
            verdict.note(f"withdrawal {op.key} failed with {row['outcome']}")
    return expected


async def _dead_letters(
    conn: asyncpg.Connection, plan: Plan, windows: list[Window], verdict: Verdict
) -> None:
    dead_modes = {
        op.result["payment_id"] for op in plan.of("payment") if op.result and op.mode == "dead"
    }
    for row in await conn.fetch(
        "SELECT source, subject_id, error, created_at FROM dead_letter_queue"
    ):
        verdict.dlq_rows += 1
        verdict.dlq_by_source[row["source"]] += 1
        if row["source"] == "webhook":
            verdict.dlq_per_webhook[row["subject_id"]] += 1
        if row["source"] == "webhook" and row["subject_id"] in dead_modes:
            continue  # the receiver always answers 500: an injected fault of the load
        at = row["created_at"].timestamp()
        if not any(w.start - 1.0 <= at <= w.end + DLQ_SLACK_S for w in windows):
            verdict.dlq_unexplained += 1
            verdict.note(
                f"unexplained DLQ row {row['source']} {row['subject_id']}: {row['error'][:120]}"
            )


async def judge(
    database_url: str,
    redis: Redis,
    plan: Plan,
    targets: list[UUID],
    settlement_asset: str,
    gateway: EmulatedGateway,
    windows: list[Window],
    recon_env: dict[str, str],
    endpoint_ids: Counter[str] | None = None,
) -> Verdict:
    """Every check; `recon_env` runs `payflow recon --full` against the private database.
    `endpoint_ids`: the webhook-ids the merchant's endpoint received (None: the run has
    no endpoint, nothing is checked there)."""
    verdict = Verdict()
    verdict.refused = sum(op.refused is not None for op in plan.ops)
    verdict.lost += sum(op.result is None and op.refused is None for op in plan.ops)
    for op in plan.ops:
        if op.refused:
            verdict.note(f"{op.kind} {op.key} refused: {op.refused}")
    conn = await asyncpg.connect(database_url)
    try:
        merchant_expected = await _payments(conn, plan, gateway, verdict)
        merchant_actual = await conn.fetchval(
            "SELECT coalesce(sum(balance), 0) FROM accounts"
            " WHERE asset = $1 AND id <> ALL($2::uuid[])",
            settlement_asset,
            targets,
        )
        if merchant_actual != merchant_expected:
            verdict.balance_mismatches += 1
            verdict.note(f"merchant {settlement_asset}: {merchant_actual} != {merchant_expected}")
        expected = await _events(conn, plan, verdict)
        balances = {
            r["id"]: r["balance"]
            for r in await conn.fetch(
                "SELECT id, balance FROM accounts WHERE id = ANY($1::uuid[])", targets
            )
        }
        for index, account in enumerate(targets):
            if balances.get(account) != expected.get(index, Decimal(0)):
                verdict.balance_mismatches += 1
                verdict.note(f"account {index}: {balances.get(account)} != {expected.get(index)}")
        verdict.webhook_both = max(
            verdict.webhook_both,
            await conn.fetchval(
                "SELECT count(*) FROM payments"
                " WHERE webhook_delivered_at IS NOT NULL AND webhook_dead_at IS NOT NULL"
            ),
        )
        duplicates = await conn.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM balance_events"
            " GROUP BY source_event_id, event_type HAVING count(*) > 1) d"
        )
        verdict.duplicated += duplicates
        await _dead_letters(conn, plan, windows, verdict)
        if endpoint_ids is not None:
            await _endpoint_deliveries(conn, endpoint_ids, verdict)
    finally:
        await conn.close()
    recon = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "payflow", "recon", "--full"],
        env=recon_env,
        capture_output=True,
        check=False,
        timeout=300,
    )
    verdict.recon_clean = recon.returncode == 0
    if not verdict.recon_clean:
        verdict.note("recon --full: " + recon.stdout.decode(errors="replace")[-400:])
    return verdict


def stamp(moment: datetime) -> float:
    """A database timestamp as time.time() seconds."""
    return moment.timestamp()
