"""The one `payflow` command: every role and tool is a subcommand."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from payflow.config import Settings, SettingsError, exit_on_settings_error, load_settings
from payflow.errors import PayflowError

T = TypeVar("T")

app = typer.Typer(no_args_is_help=True, add_completion=False, help="payflow: exactly-once payments")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print figures and ratios.")
app.add_typer(bench_app, name="bench")
console = Console(stderr=True)


def _settings() -> Settings:
    try:
        return load_settings()
    except SettingsError as error:
        exit_on_settings_error(error)
        raise  # unreachable: exit_on_settings_error raises SystemExit


def _run(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except PayflowError as error:
        console.print(f"[red]payflow: {type(error).__name__}: {error}[/red]")
        raise typer.Exit(1) from None
    except OSError as error:
        console.print(f"[red]payflow: cannot reach a service: {error}[/red]")
        raise typer.Exit(1) from None


@app.command()
def migrate() -> None:
    """Create the database if needed and apply every migration (idempotent)."""
    from payflow.db import migrate as migrations

    settings = _settings()
    created = _run(migrations.ensure_database(settings.database_url))
    if created:
        console.print("created database")
    migrations.upgrade(settings.database_url)
    console.print("migrations applied: schema at head")


@app.command()
def recon(
    full: Annotated[bool, typer.Option("--full", help="Check every account and duplicates")] = False,
) -> None:
    """Reconcile balances with the ledger; exit 1 on any mismatch."""
    from payflow.ops.recon_report import run_recon

    clean = _run(run_recon(_settings(), full=full))
    if not clean:
        raise typer.Exit(1)


@bench_app.command("ledger")
def bench_ledger(
    events: Annotated[int, typer.Option(min=1, help="Events to post")] = 20_000,
    concurrency: Annotated[int, typer.Option(min=1, max=200)] = 16,
    mode: Annotated[str, typer.Option(help="spread (10,000 accounts) or hot (one account)")] = (
        "spread"
    ),
    dup: Annotated[int, typer.Option(min=1, max=10, help="Deliveries of each event")] = 1,
    seed: Annotated[int, typer.Option(help="Workload seed")] = 7,
) -> None:
    """Post through the real posting path and compare with a plain-SQL ceiling."""
    from payflow.bench.ledger import LedgerBenchConfig, run_ledger_bench

    if mode not in ("spread", "hot"):
        console.print("[red]payflow: --mode must be spread or hot[/red]")
        raise typer.Exit(2)
    config = LedgerBenchConfig(events, concurrency, mode, dup, seed)
    ok = _run(run_ledger_bench(_settings(), config))
    if not ok:
        raise typer.Exit(1)


# --- api
merchants_app = typer.Typer(no_args_is_help=True, help="Merchants and their API keys.")
app.add_typer(merchants_app, name="merchants")


@app.command("api")
def api_serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default API_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default API_PORT)")] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Processes (default API_WORKERS)")] = (
        None
    ),
) -> None:
    """Serve the HTTP API with uvicorn (uvloop, httptools), as in production."""
    from payflow.api.server import serve

    settings = _settings()
    try:
        serve(settings, host=host, port=port, workers=workers)
    except SettingsError as error:
        exit_on_settings_error(error)


@merchants_app.command("create")
def merchants_create(
    name: Annotated[str, typer.Argument(help="Merchant name")],
    admin: Annotated[bool, typer.Option("--admin", help="Grant operator endpoints")] = False,
) -> None:
    """Create a merchant and print its API key and webhook signing secret, once."""
    from payflow.api.server import create_merchant_cli

    merchant_id, key, secret = _run(create_merchant_cli(_settings(), name, admin=admin))
    typer.echo(f"merchant_id={merchant_id}")
    typer.echo(f"api_key={key}")
    typer.echo(f"webhook_secret={secret}")
    console.print("store both now: payflow keeps only a hash of the API key")


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
    port: Annotated[int, typer.Option(help="Port for the API under test")] = 8765,
) -> None:
    """Drive POST /api/v1/payments and the signed provider endpoint; print figures."""
    from payflow.bench.api import ApiBenchConfig, run_api_bench

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


def main() -> None:
    """Entry point of the `payflow` console script."""
    app()
