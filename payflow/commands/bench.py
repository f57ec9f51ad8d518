"""`payflow bench`: benchmarks that print figures and ratios."""

from __future__ import annotations

from typing import Annotated

import typer

from payflow.commands.common import _run, _settings, console
from payflow.commands.lab import require_lab
from payflow.config import SettingsError, exit_on_settings_error

bench_app = typer.Typer(
    no_args_is_help=True,
    help="Benchmarks that print figures and ratios (dev install: payflow_lab).",
)


@bench_app.command("ledger")
def bench_ledger(
    events: Annotated[int, typer.Option(min=1, help="Events to post")] = 20_000,
    concurrency: Annotated[int, typer.Option(min=1, max=200)] = 16,
    mode: Annotated[
        str,
        typer.Option(
            help="spread (10,000 accounts, several custody accounts), system (10,000"
            " accounts, one counterparty system account) or hot (one account)"
        ),
    ] = "spread",
    dup: Annotated[int, typer.Option(min=1, max=10, help="Deliveries of each event")] = 1,
    seed: Annotated[int, typer.Option(help="Workload seed")] = 7,
) -> None:
    """Post through the real posting path and compare with a plain-SQL ceiling."""
    require_lab("payflow bench ledger")
    from payflow_lab.bench.ledger import LedgerBenchConfig, run_ledger_bench

    if mode not in ("spread", "hot", "system"):
        console.print("payflow: --mode must be spread, hot or system", style="red")
        raise typer.Exit(2)
    config = LedgerBenchConfig(events, concurrency, mode, dup, seed)
    ok = _run(run_ledger_bench(_settings(), config))
    if not ok:
        raise typer.Exit(1)


@bench_app.command("chain")
def bench_chain(
    blocks: Annotated[int, typer.Option(min=1, help="Pre-mined blocks")] = 200,
    per_block: Annotated[int, typer.Option(min=1, help="Transfers per block")] = 20,
    addresses: Annotated[int, typer.Option(min=2, help="Deposit addresses (even)")] = 50,
    batch_blocks: Annotated[int, typer.Option(min=1, help="Blocks per scanner step")] = 50,
    ours_every: Annotated[
        int, typer.Option(min=1, help="1 in N transfer pairs goes to our addresses")
    ] = 4,
) -> None:
    """Scanner vs a bare block walk, cold/warm verification, RPC calls per credit
    (against an anvil it starts itself; `make anvil`)."""
    require_lab("payflow bench chain")
    from payflow_lab.bench.chain import ChainBenchConfig, run_chain_bench

    if addresses % 2:
        console.print("payflow: --addresses must be even (ETH and USDC alternate)", style="red")
        raise typer.Exit(2)
    config = ChainBenchConfig(blocks, per_block, addresses, batch_blocks, ours_every)
    if not _run(run_chain_bench(_settings(), config, console)):
        raise typer.Exit(1)


@bench_app.command("payouts")
def bench_payouts(
    payouts: Annotated[int, typer.Option(min=1, help="Payouts per phase")] = 200,
    wallets: Annotated[int, typer.Option(min=2, max=32, help="Hot wallets, phase 2")] = 4,
) -> None:
    """Payouts/s hold->broadcast on anvil: one hot wallet, several, and a bare
    sign+send loop of as many transactions (the ceiling)."""
    require_lab("payflow bench payouts")
    from payflow_lab.bench.payouts import PayoutBenchConfig, run_payouts_bench

    ok = _run(run_payouts_bench(_settings(), PayoutBenchConfig(payouts, wallets)))
    if not ok:
        raise typer.Exit(1)


@bench_app.command("e2e")
def bench_e2e(
    payments: Annotated[
        int, typer.Option(min=1, help="Payments (and as many deposits) per phase")
    ] = 2000,
    rate: Annotated[float, typer.Option(min=1, help="Payments/s in the fixed-rate phase")] = 200.0,
    workers: Annotated[int, typer.Option(min=0, max=8, help="Extra worker processes")] = 0,
    relays: Annotated[int, typer.Option(min=0, max=4, help="Extra relay processes")] = 0,
    split: Annotated[
        bool, typer.Option("--split", help="One process per role instead of `payflow up`")
    ] = False,
    direct: Annotated[
        bool,
        typer.Option("--direct", help="Write rows straight to the DB instead of the HTTP API"),
    ] = False,
    payments_only: Annotated[
        bool, typer.Option("--payments-only", help="Submit merchant payments, no deposits")
    ] = False,
    gateway_delay: Annotated[
        str, typer.Option(help="The emulated gateway's delay in seconds, MIN-MAX (uniform) or one")
    ] = "0",
    prefill: Annotated[
        int, typer.Option(min=0, help="Finished payments in the ledger before the load")
    ] = 100_000,
    endpoints: Annotated[
        int,
        typer.Option(
            min=0,
            max=20,
            help="Webhook endpoints of the bench merchant (each wants every event; 0: none)",
        ),
    ] = 0,
) -> None:
    """The whole system (local sink) at a fixed rate and at full speed.

    Submits through the HTTP API (merchant payments, signed provider deposits) unless
    `--direct`, which isolates the pipeline from the API. `--gateway-delay 2-5` is the
    seed's slow gateway; the last line then compares payments/s with the seed's 30/s.
    `--endpoints N` registers N webhook endpoints on the sink first and checks that each
    payment event reached every one of them once, nothing dead.
    """
    import tempfile
    from pathlib import Path

    require_lab("payflow bench e2e")
    from payflow_lab.bench.e2e import E2EConfig, run_e2e_bench

    try:
        low, _, high = gateway_delay.partition("-")
        delay = (float(low), float(high or low))
        if not 0 <= delay[0] <= delay[1]:
            raise ValueError
    except ValueError:
        console.print(
            "payflow: --gateway-delay must be MIN-MAX seconds, 0 <= MIN <= MAX", style="red"
        )
        raise typer.Exit(2) from None

    log_dir = Path(tempfile.mkdtemp(prefix="payflow-bench-e2e-"))
    console.print(f"service logs: {log_dir}")
    ok = _run(
        run_e2e_bench(
            _settings(),
            E2EConfig(
                payments,
                rate,
                workers,
                relays,
                split,
                direct,
                delay,
                not payments_only,
                prefill,
                endpoints,
            ),
            log_dir,
        )
    )
    if not ok:
        raise typer.Exit(1)


@bench_app.command("webhooks")
def bench_webhooks(
    webhooks: Annotated[int, typer.Option(min=1, help="Deliveries per measured run")] = 2000,
    delay: Annotated[float, typer.Option(min=0.01, help="The slow receiver's delay (s)")] = 1.0,
    prefill: Annotated[int, typer.Option(min=0, help="Delivered payments in the table")] = (
        100_000
    ),
    fanout: Annotated[
        int,
        typer.Option(
            min=0, max=20, help="Fan each merchant event out to N webhook endpoints (0: off)"
        ),
    ] = 0,
) -> None:
    """Webhook deliveries/s of the sender and of a bare httpx loop, receiver delay 0 and
    `--delay`, side by side; the ratios go on the last line. With `--fanout N`: `--webhooks`
    events, each delivered to N endpoints by the endpoint sender, against a bare aiohttp
    loop of as many POSTs."""
    require_lab("payflow bench webhooks")
    if fanout:
        from payflow_lab.bench.webhooks_fanout import FanoutBenchConfig, run_fanout_bench

        if not _run(run_fanout_bench(_settings(), FanoutBenchConfig(webhooks, fanout))):
            raise typer.Exit(1)
        return
    from payflow_lab.bench.webhooks import WebhooksBenchConfig, run_webhooks_bench

    ok = _run(run_webhooks_bench(_settings(), WebhooksBenchConfig(webhooks, delay, prefill)))
    if not ok:
        raise typer.Exit(1)


@bench_app.command("api")
def bench_api(
    seconds: Annotated[float, typer.Option(min=0.5, help="Duration of each run")] = 5.0,
    concurrency: Annotated[
        list[int] | None, typer.Option(help="Concurrency levels (repeatable)")
    ] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="API processes (API_WORKERS)")] = None,
    clients: Annotated[int, typer.Option(min=1, help="Load generator processes")] = 2,
    prefill: Annotated[int, typer.Option(min=0, help="Payments inserted before measuring")] = (
        200_000
    ),
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port for the API under test")] = 8765,
) -> None:
    """Drive POST /api/v1/payments and the signed provider endpoint; print figures."""
    require_lab("payflow bench api")
    from payflow_lab.bench.api import ApiBenchConfig, run_api_bench

    config = ApiBenchConfig(
        seconds=seconds,
        concurrency=tuple(concurrency or (10, 50)),
        workers=workers,
        clients=clients,
        prefill=prefill,
        port=port,
    )
    try:
        ok = run_api_bench(_settings(), config)
    except SettingsError as error:
        exit_on_settings_error(error)
        return
    if not ok:
        raise typer.Exit(1)


@bench_app.command("console")
def bench_console(
    payments: Annotated[
        int, typer.Option(min=1000, help="Payments (and as many deposit events) pre-filled")
    ] = 200_000,
    rounds: Annotated[int, typer.Option(min=1, help="Timed runs per query")] = 30,
    inserts: Annotated[int, typer.Option(min=1, help="Payments per timed INSERT batch")] = 5_000,
) -> None:
    """The console's reads on filled tables with and without migration 0017's indexes."""
    require_lab("payflow bench console")
    from payflow_lab.bench.console import ConsoleBenchConfig, run_console_bench

    ok = _run(run_console_bench(_settings(), ConsoleBenchConfig(payments, rounds, inserts)))
    if not ok:
        raise typer.Exit(1)
