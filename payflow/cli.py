"""The one `payflow` command: every role and tool is a subcommand.

The roles and shared helpers live here; each command group lives in payflow/commands/.
"""

from __future__ import annotations

import sys
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.console import Console

from payflow.commands import (
    alerts,
    assets,
    bench,
    chaos,
    dlq,
    jobs,
    ledger,
    merchants,
    payments,
    payouts,
    tokens,
    treasury,
    unmatched,
    wallet,
)
from payflow.commands.common import _run, _settings, console
from payflow.config import SettingsError, exit_on_settings_error

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="payflow: exactly-once payments",
)


@app.command()
def migrate(
    downgrade: Annotated[
        str | None,
        typer.Option(
            "--downgrade", metavar="REV", help="Take the schema down to REV (or base) instead"
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="With --downgrade: also run steps that drop data")
    ] = False,
) -> None:
    """Create the roles and database if needed, apply every migration as the owner role
    and grant the service's role its privileges (idempotent); or, with --downgrade REV,
    step down to REV, refusing any step that would drop data unless --force (exit 1 with
    a one-line error)."""
    import asyncpg
    from sqlalchemy.exc import SQLAlchemyError

    from payflow.db import migrate as migrations

    settings = _settings()
    url, owner = settings.migration_url(), settings.db_owner_role
    if downgrade is not None:
        try:
            before = _run(migrations.applied_revision(url))
            migrations.downgrade(url, downgrade, force=force, owner_role=owner)
            after = _run(migrations.applied_revision(url))
        except (migrations.DataLossRefused, migrations.CommandError) as error:
            console.print(f"payflow: {error}", style="red")
            raise typer.Exit(1) from None
        except (SQLAlchemyError, asyncpg.PostgresError, OSError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            console.print(
                f"payflow: downgrade failed: {type(error).__name__}: {first}", style="red"
            )
            raise typer.Exit(1) from None
        if before == after:
            console.print(f"nothing to downgrade: schema already at {after or 'base'}")
        else:
            console.print(f"migrations downgraded: schema at {after or 'base'} (was {before})")
        return
    if force:
        console.print("payflow: --force applies only with --downgrade REV", style="red")
        raise typer.Exit(2)
    try:
        app_role = migrations.login_role(settings.database_url)
    except ValueError as error:
        exit_on_settings_error(SettingsError(str(error)))
        raise
    password = migrations.login_password(settings.database_url)
    if _run(migrations.prepare_database(url, owner=owner, app=app_role, app_password=password)):
        console.print("created database")
    migrations.upgrade(url, owner_role=owner)
    _run(migrations.grant_service(url, owner=owner, app=app_role))
    console.print(f"migrations applied as {owner}; {app_role} granted the service's privileges")


@app.command()
def recon(
    full: Annotated[
        bool,
        typer.Option(
            "--full", help="Check every account, the trial balance per asset and duplicates"
        ),
    ] = False,
    chain: Annotated[
        bool, typer.Option("--chain", help="Compare final blocks with the chain credits")
    ] = False,
    from_block: Annotated[
        int | None,
        typer.Option("--from-block", min=0, help="With --chain: first block to re-read"),
    ] = None,
    gateway: Annotated[
        bool,
        typer.Option("--gateway", help="Match the gateway's settled charges with the books"),
    ] = False,
    on_date: Annotated[
        datetime | None,
        typer.Option(
            "--date", formats=["%Y-%m-%d"], help="With --gateway: the UTC day (default yesterday)"
        ),
    ] = None,
) -> None:
    """Reconcile balances with the journal (with --full also the trial balance: per asset
    debits equal credits over the whole journal), or, with --chain, credits with the
    chain's final blocks and the custody accounts with the chain's balances, or, with
    --gateway, the gateway's settled charges of a day with the books; exit 1 on any
    mismatch."""
    if gateway:
        from payflow.payments.gateway_recon_cli import run_gateway_recon

        day = on_date.date() if on_date else datetime.now(UTC).date() - timedelta(days=1)
        settings = _settings()
        found = run_gateway_recon(
            settings.database, day, redis_settings=settings.redis, emulator=settings.emulator
        )
        if not _run(found):
            raise typer.Exit(1)
        return
    if chain:
        from payflow.chain.recon_cli import run_chain_recon

        settings = _settings()
        checked = run_chain_recon(
            settings.chain,
            from_block=from_block,
            database=settings.database,
            redis_settings=settings.redis,
        )
        if not _run(checked):
            raise typer.Exit(1)
        return
    from payflow.ops.recon_report import run_recon

    clean = _run(run_recon(_settings(), full=full))
    if not clean:
        raise typer.Exit(1)


# --- pipeline
def _serve(roles: list[str], worker_queues: tuple[str, ...] | None = None) -> None:
    from payflow.roles import WORKER_QUEUES, serve

    _run(serve(_settings(), roles, worker_queues=worker_queues or WORKER_QUEUES))


@app.command()
def up() -> None:
    """Run every role in one process until SIGTERM (graceful: in-flight work finishes)."""
    from payflow.api.server import check_fiat_assets
    from payflow.ingress.signature import require_secret
    from payflow.roles import up_roles

    try:
        require_secret(_settings())  # the API role needs it: refuse before starting anything
        _run(check_fiat_assets(_settings()))
    except SettingsError as error:
        exit_on_settings_error(error)
    _serve(list(up_roles(_settings())))


@app.command()
def relay() -> None:
    """Run the outbox relay (several may run at once)."""
    _serve(["relay"])


@app.command()
def worker(
    queues: Annotated[
        str, typer.Option(help="Comma-separated work queues: payments,ledger,webhooks,endpoints")
    ] = "payments,ledger,webhooks,endpoints",
) -> None:
    """Run a worker consuming the given queues."""
    chosen = tuple(q.strip() for q in queues.split(",") if q.strip())
    allowed = {"payments", "ledger", "webhooks", "endpoints"}
    if not chosen or not set(chosen) <= allowed:
        console.print(
            "payflow: --queues takes payments, ledger, webhooks and/or endpoints", style="red"
        )
        raise typer.Exit(2)
    _serve(["worker"], chosen)


@app.command()
def scheduler(
    once: Annotated[
        bool, typer.Option("--once", help="Run every job once now (recorded) and exit")
    ] = False,
) -> None:
    """Run the scheduler: each job when due, a singleton per job across replicas."""
    if not once:
        _serve(["scheduler"])
        return
    from payflow.observability import configure_logging
    from payflow.ops.jobs_cli import run_by_hand
    from payflow.ops.scheduler import JOBS

    settings = _settings()
    configure_logging(settings.observability)  # logs to stderr: stdout carries the results

    async def run_once() -> bool:
        out = Console(soft_wrap=True)
        return all([await run_by_hand(settings, name, out) for name in JOBS])

    if not _run(run_once()):
        raise typer.Exit(1)


@app.command()
def scanner(
    once: Annotated[
        bool, typer.Option("--once", help="Walk every chain up to head - lag once and exit")
    ] = False,
) -> None:
    """Run the chain scanner: walk new blocks from the cursor in PostgreSQL, report
    deposits to our addresses, walk back on reorgs (several replicas may run)."""
    if not once:
        _serve(["scanner"])
        return
    from payflow.chain.watch.cli import scan_once

    settings = _settings()
    scanned = scan_once(
        settings.chain,
        database=settings.database,
        redis_settings=settings.redis,
        observability=settings.observability,
    )
    if not _run(scanned):
        raise typer.Exit(1)


app.command()(jobs.status)  # jobs and status (docs/operations.md)
app.command()(chaos.chaos)  # chaos and soak runs (docs/reliability.md)


# --- api
@app.command("api")
def api_serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default API_HOST)")] = None,
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="Port (default API_PORT)")
    ] = None,
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


# Command groups, in the order `payflow --help` lists them.
app.add_typer(bench.bench_app, name="bench")
app.add_typer(dlq.dlq_app, name="dlq")
app.add_typer(jobs.jobs_app, name="jobs")
app.add_typer(alerts.alerts_app, name="alerts")
app.add_typer(merchants.merchants_app, name="merchants")
app.add_typer(assets.assets_app, name="assets")
app.add_typer(ledger.ledger_app, name="ledger")
app.add_typer(treasury.treasury_app, name="treasury")
app.add_typer(payments.payments_app, name="payments")
app.add_typer(unmatched.unmatched_app, name="unmatched")
app.add_typer(tokens.tokens_app, name="tokens")
app.add_typer(wallet.wallet_app, name="wallet")
app.add_typer(payouts.payouts_app, name="payouts")


def unprintable_argument(arguments: list[str]) -> str | None:
    """The reason to refuse the first argument that is not printable UTF-8 text, or None.

    Arguments become ids, names, labels and reasons that reach PostgreSQL or are printed
    back to an operator's terminal: bytes that are not UTF-8 (Python keeps them as lone
    surrogates, which the driver refuses with its own text) and control characters (an
    escape sequence or a newline rewrites what the next operator reads) are refused for
    every command at once (so `unmatched replay $'\\xff'` never prints the driver's
    refusal, and `dlq replay --by $'ops\\e[31m'` never stores or echoes the sequence)."""
    for position, argument in enumerate(arguments, start=1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            return f"argument {position} is not UTF-8 text"
        if any(unicodedata.category(char) == "Cc" for char in argument):
            return f"argument {position} holds a control character (a NUL, newline, tab or escape)"
    return None


def main() -> None:
    """Entry point of the `payflow` console script."""
    reason = unprintable_argument(sys.argv[1:])
    if reason is not None:
        print(f"payflow: {reason}", file=sys.stderr)
        raise SystemExit(2)
    app()
