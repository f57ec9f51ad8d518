"""`payflow bench e2e`'s measurements: one phase's figures read back from the database's
clock, the exactly-once verdict, and the printed report.

Accept = the outbox row's `created_at` (the accepting transaction's time, taken before
its commit); publish = `published_at`; terminal = `processed_at` (payments) or the
confirming `updated_at` (deposits); delivered = `webhook_delivered_at`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

import asyncpg
import psutil
from rich.console import Console

from payflow.config import Settings
from payflow.ledger.recon import reconcile
from payflow.money import multiply
from payflow_lab.bench.common import percentile
from payflow_lab.bench.history import HISTORY_AMOUNT
from payflow_lab.bench.http_submit import HttpSubmitter
from payflow_lab.bench.services import Service
from payflow_lab.bench.sink import WebhookSink

if TYPE_CHECKING:
    from payflow_lab.bench.e2e import E2EConfig


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """Throughput and latency samples (ms, ascending) of one phase."""

    name: str
    payments_per_s: float
    events_per_s: float
    # Deliveries/s between the 10th and the 90th percentile delivery: the pipeline's
    # sustained rate, without the ramp-up and the last gateway delay at either end.
    sustained_per_s: float
    # Payments/s the API accepted (first to last accepted request of the phase): the
    # arrival rate the pipeline was offered.
    accepted_per_s: float
    publish_ms: list[float]
    terminal_ms: list[float]
    delivered_ms: list[float]

    def figures(self) -> dict[str, float]:
        """The printed figures, rounded."""

        def q(values: list[float], fraction: float) -> float:
            return round(percentile(values, fraction), 1)

        return {
            "events_per_s": round(self.events_per_s, 1),
            "payments_per_s": round(self.payments_per_s, 1),
            "sustained_per_s": round(self.sustained_per_s, 1),
            "accepted_per_s": round(self.accepted_per_s, 1),
            "publish_p50_ms": q(self.publish_ms, 0.50),
            "publish_p99_ms": q(self.publish_ms, 0.99),
            "terminal_p50_ms": q(self.terminal_ms, 0.50),
            "terminal_p99_ms": q(self.terminal_ms, 0.99),
            "delivered_p50_ms": q(self.delivered_ms, 0.50),
            "delivered_p99_ms": q(self.delivered_ms, 0.99),
        }


def sustained_rate(done_at: list[float]) -> float:
    """Completions/s between the 10th and the 90th percentile completion time (epoch s,
    ascending): 80% of the phase over the time it took."""
    if len(done_at) < 10:
        return 0.0
    low, high = int(len(done_at) * 0.1), int(len(done_at) * 0.9)
    return (high - low) / max(done_at[high] - done_at[low], 1e-6)


async def measure_phase(
    pool: asyncpg.Pool, tag: str, name: str, accepted: dict[str, float]
) -> PhaseResult:
    """The figures of phase `tag` (its payments' idempotency keys and deposits' event ids
    start with `tag-`); `accepted` maps each key to the epoch seconds its request returned.

    Payments/s run from the first accepted request to the last webhook delivered, so they
    include the last payments' gateway delay; the sustained rate leaves both ends out."""
    payments = await pool.fetch(
        """
        SELECT p.idempotency_key AS key,
               extract(epoch FROM o.created_at) AS accepted,
               extract(epoch FROM o.published_at) AS published,
               extract(epoch FROM p.processed_at) AS terminal,
               extract(epoch FROM p.webhook_delivered_at) AS delivered
        FROM payments p
        JOIN outbox o ON o.topic = 'payment.created' AND o.payload->>'payment_id' = p.id::text
        WHERE p.idempotency_key LIKE $1 || '-%'
        """,
        tag,
    )
    deposits = await pool.fetch(
        """
        SELECT CASE WHEN e.event_id LIKE 'gen:%' THEN substr(e.event_id, 5)
                    ELSE e.event_id END AS key,
               extract(epoch FROM o.created_at) AS accepted,
               extract(epoch FROM o.published_at) AS published,
               extract(epoch FROM e.updated_at) AS terminal
        FROM payment_events e
        JOIN outbox o ON o.topic = 'ledger.event' AND o.payload->>'event_id' = e.event_id
        -- the direct submitter stores the bench's ids, the API its generic namespace
        WHERE e.event_id LIKE $1 || '-dep-%' OR e.event_id LIKE 'gen:' || $1 || '-dep-%'
        """,
        tag,
    )

    def ms(rows: list[asyncpg.Record], column: str) -> list[float]:
        return sorted((float(r[column]) - float(r["accepted"])) * 1000 for r in rows)

    first = min(accepted[r["key"]] for r in [*payments, *deposits])
    accepted_at = [accepted[r["key"]] for r in payments]
    last_terminal = float(max(r["terminal"] for r in [*payments, *deposits]))
    last_delivered = float(max(r["delivered"] for r in payments))
    window = max(last_terminal, last_delivered) - first
    return PhaseResult(
        name=name,
        payments_per_s=len(payments) / max(last_delivered - first, 1e-6),
        sustained_per_s=sustained_rate(sorted(float(r["delivered"]) for r in payments)),
        accepted_per_s=len(payments) / max(max(accepted_at) - min(accepted_at), 1e-6),
        events_per_s=(len(payments) + len(deposits)) / max(window, 1e-6),
        publish_ms=ms([*payments, *deposits], "published"),
        terminal_ms=ms([*payments, *deposits], "terminal"),
        delivered_ms=ms(payments, "delivered"),
    )


async def exactly_once(
    pool: asyncpg.Pool,
    settings: Settings,
    sink: WebhookSink,
    total_payments: int,
    deposits: int,
    history: int,
) -> tuple[bool, bool]:
    """(exactly once, reconciliation clean) over the run's payments and deposits, on
    top of the `history` payments written before it (10.00 USD each, one ledger row)."""
    ledger_rows = await pool.fetchval("SELECT count(*) FROM balance_events")
    duplicates = await pool.fetchval(
        "SELECT count(*) FROM (SELECT source_event_id FROM balance_events"
        " GROUP BY source_event_id HAVING count(*) > 1) d"
    )
    merchant_balance: Decimal = await pool.fetchval(
        "SELECT coalesce(sum(balance), 0) FROM accounts WHERE merchant_id IS NOT NULL"
    )
    ids = [r.headers.get("webhook-id") for r in sink.at("/hook")]
    once = (
        ledger_rows == total_payments + deposits + history
        and duplicates == 0
        and merchant_balance
        == multiply(Decimal("1.25"), total_payments) + multiply(HISTORY_AMOUNT, history)
        and len(set(ids)) == total_payments
        and len(ids) == total_payments
    )
    clean = (await reconcile(pool, settings, full=True)).clean
    return once, clean


def report_full_cpu(console: Console, cores: dict[str, float], payments_per_s: float) -> float:
    """Where the CPU went in the full-speed phase: cores busy and CPU ms per payment for
    each role, PostgreSQL, RabbitMQ, this driver and the rest of the machine. Returns the
    machine's busy share (1.0: every core busy, so the bound is CPU, not slots)."""
    machine = cores.pop("machine_busy")
    driver = cores.pop("this_process")
    parts = {**cores, "bench driver+sink": driver}
    parts["other"] = max(0.0, machine - sum(parts.values()))

    def per_payment(cores_used: float) -> float:
        return 1000 * cores_used / payments_per_s if payments_per_s > 0 else 0.0

    total_cores = psutil.cpu_count() or 1
    console.print(
        f"full speed, where the CPU went: machine {machine:.2f} of {total_cores} cores busy, "
        f"{per_payment(machine):.1f} CPU ms per payment"
    )
    for name, used in sorted(parts.items(), key=lambda item: -item[1]):
        console.print(f"  {name:<18} {used:5.2f} cores  {per_payment(used):5.1f} ms/payment")
    return machine / total_cores


def report(
    console: Console,
    config: E2EConfig,
    results: list[PhaseResult],
    service: Service,
    exit_codes: list[int],
    cpu: dict[str, float],
    wall: float,
    http: HttpSubmitter | None,
) -> None:
    """The human-readable figures (everything but the last line)."""
    for result in results:
        console.print(
            f"[bold]{result.name}[/bold]: {config.payments} payments + "
            f"{config.payments if config.deposits else 0} deposits"
        )
        for key, value in result.figures().items():
            console.print(f"  {key:<18} {value}")
    via = (
        "direct database writes (--direct)"
        if http is None
        else f"HTTP API at {service.api_url} ({http.retries} retries on 429/503)"
    )
    console.print(f"submitted through: {via}")
    rss = ", ".join(
        f"{name} {mb:.0f}"
        for name, mb in zip(service.names, service.peak_rss_mb.values(), strict=True)
    )
    console.print(
        f"processes: {' + '.join(service.names)}; peak RSS per process (MB): {rss}; "
        f"exit codes {exit_codes}"
    )
    console.print(
        "CPU during the phases (cores busy): "
        f"machine {cpu['machine_busy']:.2f} of {psutil.cpu_count()}, "
        f"postgres {cpu['postgres']:.2f}, rabbitmq {cpu['rabbitmq']:.2f}, "
        f"bench driver+sink {cpu['this_process']:.2f}, "
        f"payflow processes (whole run) {sum(service.cpu_s.values()) / wall:.2f}"
    )
