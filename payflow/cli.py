"""The one `payflow` command: every role and tool is a subcommand."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Annotated, Any, TypeVar

import typer
import uvloop
from rich.console import Console

from payflow.config import Settings, SettingsError, exit_on_settings_error, load_settings
from payflow.errors import PayflowError

T = TypeVar("T")

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="payflow: exactly-once payments",
)
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
        return uvloop.run(coro)
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
    full: Annotated[
        bool, typer.Option("--full", help="Check every account and duplicates")
    ] = False,
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


def main() -> None:
    """Entry point of the `payflow` console script."""
    app()
