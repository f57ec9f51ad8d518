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
# One-line errors stay one line; markup is off, because messages carry operator input and
# stored text (event ids, DLQ errors) that must print as is, never be parsed as markup.
console = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)


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
        console.print(f"payflow: {type(error).__name__}: {error}", style="red")
        raise typer.Exit(1) from None
    except OSError as error:
        console.print(f"payflow: cannot reach a service: {error}", style="red")
        raise typer.Exit(1) from None


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
            migrations.downgrade(url, downgrade, force=force, owner_role=owner)
        except (migrations.DataLossRefused, migrations.CommandError) as error:
            console.print(f"payflow: {error}", style="red")
            raise typer.Exit(1) from None
        except (SQLAlchemyError, asyncpg.PostgresError, OSError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            console.print(f"[red]payflow: downgrade failed: {type(error).__name__}: {first}[/red]")
            raise typer.Exit(1) from None
        console.print(f"migrations downgraded: schema at {downgrade}")
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
        bool, typer.Option("--full", help="Check every account and duplicates")
    ] = False,
) -> None:
    """Reconcile balances with the ledger; exit 1 on any mismatch."""
    from payflow.ops.recon_report import run_recon

    clean = _run(run_recon(_settings(), full=full))
    if not clean:
        raise typer.Exit(1)


# --- pipeline
dlq_app = typer.Typer(no_args_is_help=True, help="Inspect and replay the dead-letter queue.")
app.add_typer(dlq_app, name="dlq")


def _serve(roles: list[str], worker_queues: tuple[str, ...] | None = None) -> None:
    from payflow.roles import WORKER_QUEUES, serve

    _run(serve(_settings(), roles, worker_queues=worker_queues or WORKER_QUEUES))


@app.command()
def up() -> None:
    """Run every role in one process until SIGTERM (graceful: in-flight work finishes)."""
    from payflow.ingress.signature import require_secret
    from payflow.roles import UP_ROLES

    try:
        require_secret(_settings())  # the API role needs it: refuse before starting anything
    except SettingsError as error:
        exit_on_settings_error(error)
    _serve(list(UP_ROLES))


@app.command()
def relay() -> None:
    """Run the outbox relay (several may run at once)."""
    _serve(["relay"])


@app.command()
def worker(
    queues: Annotated[
        str, typer.Option(help="Comma-separated work queues: payments,ledger,webhooks")
    ] = "payments,ledger,webhooks",
) -> None:
    """Run a worker consuming the given queues."""
    chosen = tuple(q.strip() for q in queues.split(",") if q.strip())
    allowed = {"payments", "ledger", "webhooks"}
    if not chosen or not set(chosen) <= allowed:
        console.print("payflow: --queues takes payments, ledger and/or webhooks", style="red")
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
    configure_logging(settings)  # logs to stderr: stdout carries the results

    async def run_once() -> bool:
        out = Console(soft_wrap=True)
        return all([await run_by_hand(settings, name, out) for name in JOBS])

    if not _run(run_once()):
        raise typer.Exit(1)


# --- jobs and status (issue 9, docs/operations.md)
jobs_app = typer.Typer(no_args_is_help=True, help="Maintenance jobs and their last runs.")
app.add_typer(jobs_app, name="jobs")


@jobs_app.command("list")
def jobs_list() -> None:
    """Every job: interval, last run (start, outcome, summary) and when it is next due."""
    from payflow.ops.jobs_cli import print_jobs

    _run(print_jobs(_settings(), Console(soft_wrap=True)))


@jobs_app.command("run")
def jobs_run(
    name: Annotated[str, typer.Argument(help="Job name (see `payflow jobs list`)")],
) -> None:
    """Run one job now (recorded in job_runs); exit 1 when it fails."""
    from payflow.observability import configure_logging
    from payflow.ops.jobs_cli import run_by_hand
    from payflow.ops.scheduler import JOBS, UnknownJob

    if name not in JOBS:
        console.print(f"[red]payflow: {UnknownJob(name)}[/red]")
        raise typer.Exit(2)
    settings = _settings()
    configure_logging(settings)  # logs to stderr: stdout carries the result
    if not _run(run_by_hand(settings, name, Console(soft_wrap=True))):
        raise typer.Exit(1)


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Machine output (JSON)")] = False,
) -> None:
    """Is the money right, and is it flowing? Exit 1 when something is wrong."""
    from payflow.observability import configure_logging
    from payflow.ops.status import print_status

    settings = _settings()
    configure_logging(settings)  # logs to stderr: stdout carries the status
    if not _run(print_status(settings, as_json=as_json)):
        raise typer.Exit(1)


@dlq_app.command("list")
def dlq_list(
    all_rows: Annotated[bool, typer.Option("--all", help="Include resolved rows")] = False,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 50,
) -> None:
    """List dead letters, newest first."""
    from payflow.ops.dlq_cli import print_list

    _run(print_list(_settings(), include_resolved=all_rows, limit=limit))


@dlq_app.command("show")
def dlq_show(dlq_id: Annotated[int, typer.Argument(help="DLQ row id")]) -> None:
    """Show one dead letter in full."""
    from payflow.ops.dlq_cli import print_one

    _run(print_one(_settings(), dlq_id))


@dlq_app.command("replay")
def dlq_replay(
    dlq_id: Annotated[int, typer.Argument(help="DLQ row id")],
    by: Annotated[str, typer.Option("--by", help="Operator name recorded as resolved_by")] = "",
) -> None:
    """Replay one dead letter by hand; audited, and never applies anything twice."""
    import getpass

    from payflow.ops.dlq_cli import replay_one

    operator = by or getpass.getuser()
    _run(replay_one(_settings(), dlq_id, operator))


alerts_app = typer.Typer(no_args_is_help=True, help="Open alerts: list and acknowledge.")
app.add_typer(alerts_app, name="alerts")


@alerts_app.command("list")
def alerts_list(
    all_rows: Annotated[bool, typer.Option("--all", help="Include resolved alerts")] = False,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 100,
) -> None:
    """List alerts: open first, most severe first, newest first."""
    from payflow.ops.alerting.cli import print_list

    _run(print_list(_settings(), include_resolved=all_rows, limit=limit))


@alerts_app.command("ack")
def alerts_ack(
    key: Annotated[str, typer.Argument(help="Alert key, e.g. recon.mismatch:hot")],
    by: Annotated[str, typer.Option("--by", help="Operator recorded as acknowledged_by")] = "",
) -> None:
    """Acknowledge the open alert KEY (records who); its reminders stop until it resolves."""
    import getpass

    from payflow.ops.alerting.cli import acknowledge

    operator = by or getpass.getuser()
    row = _run(acknowledge(_settings(), key, operator))
    if row is None:
        console.print(f"[red]payflow: no open alert {key!r}[/red]")
        raise typer.Exit(1)
    console.print(f"alert {key}: acknowledged by {row.acknowledged_by} at {row.acknowledged_at}")


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
        console.print("payflow: --mode must be spread or hot", style="red")
        raise typer.Exit(2)
    config = LedgerBenchConfig(events, concurrency, mode, dup, seed)
    ok = _run(run_ledger_bench(_settings(), config))
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
) -> None:
    """The whole system (gateway delay 0, local sink) at a fixed rate and at full speed.

    Submits through the HTTP API (merchant payments, signed provider deposits) unless
    `--direct`, which isolates the pipeline from the API.
    """
    import tempfile
    from pathlib import Path

    from payflow.bench.e2e import E2EConfig, run_e2e_bench

    log_dir = Path(tempfile.mkdtemp(prefix="payflow-bench-e2e-"))
    console.print(f"service logs: {log_dir}")
    ok = _run(
        run_e2e_bench(
            _settings(), E2EConfig(payments, rate, workers, relays, split, direct), log_dir
        )
    )
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


# --- assets (per-asset limits; issue 7)
assets_app = typer.Typer(no_args_is_help=True, help="Assets and their per-operation limits.")
app.add_typer(assets_app, name="assets")


@assets_app.command("list")
def assets_list() -> None:
    """Print every asset with its scale and its max payment, withdrawal and deposit."""
    from payflow.db.pool import tool_pool
    from payflow.ledger.limits import all_limits
    from payflow.money import format_at_scale

    async def read() -> list[Any]:
        async with tool_pool(_settings()) as pool, pool.acquire() as conn:
            return await all_limits(conn)

    typer.echo("asset\tscale\tmax_payment\tmax_withdrawal\tmax_deposit")
    for limits in _run(read()):
        columns = (limits.max_payment, limits.max_withdrawal, limits.max_deposit)
        shown = "\t".join(format_at_scale(value, limits.scale) for value in columns)
        typer.echo(f"{limits.asset}\t{limits.scale}\t{shown}")


@assets_app.command("set-limit")
def assets_set_limit(
    asset: Annotated[str, typer.Argument(help="Asset code, e.g. RUB or ETH")],
    payment: Annotated[str | None, typer.Option(help="Max single payment")] = None,
    withdrawal: Annotated[str | None, typer.Option(help="Max single withdrawal")] = None,
    deposit: Annotated[str | None, typer.Option(help="Max single deposit")] = None,
) -> None:
    """Change an asset's maxima (decimal strings at the asset's scale); others stay."""
    from payflow.db.pool import tool_pool
    from payflow.db.tx import transaction
    from payflow.ledger.limits import AssetLimits, set_limits
    from payflow.money import format_at_scale

    if payment is None and withdrawal is None and deposit is None:
        console.print(
            "payflow: give at least one of --payment, --withdrawal, --deposit", style="red"
        )
        raise typer.Exit(2)
    settings = _settings()

    async def write() -> AssetLimits:
        async with tool_pool(settings, operator=True) as pool, pool.acquire() as conn:
            async with transaction(conn, settings):
                return await set_limits(
                    conn, asset, payment=payment, withdrawal=withdrawal, deposit=deposit
                )

    limits = _run(write())
    typer.echo(
        f"{limits.asset}: max_payment={format_at_scale(limits.max_payment, limits.scale)} "
        f"max_withdrawal={format_at_scale(limits.max_withdrawal, limits.scale)} "
        f"max_deposit={format_at_scale(limits.max_deposit, limits.scale)}"
    )


# --- payments: charges whose gateway outcome is unknown (docs/pipeline.md)
payments_app = typer.Typer(no_args_is_help=True, help="Charges waiting for an operator.")
app.add_typer(payments_app, name="payments")


@payments_app.command("review")
def payments_review(limit: Annotated[int, typer.Option(min=1, max=10_000)] = 100) -> None:
    """List charges parked as needs_review (payment pending, gateway outcome unknown)."""
    from payflow.payments.review import print_review

    _run(print_review(_settings(), limit))


@payments_app.command("resolve")
def payments_resolve(
    payment_id: Annotated[str, typer.Argument(help="Payment id")],
    approved: Annotated[
        bool, typer.Option("--approved/--declined", help="What the gateway's records show")
    ],
    reference: Annotated[str, typer.Option(help="The gateway's id of the charge")] = "",
    by: Annotated[str, typer.Option("--by", help="Operator name recorded on the attempt")] = "",
) -> None:
    """Record a charge's outcome read from the gateway's own records; finalizes the payment."""
    import getpass
    from uuid import UUID

    from payflow.payments.review import resolve_cli

    try:
        payment = UUID(payment_id)
    except ValueError:
        console.print(f"payflow: not a payment id: {payment_id!r}", style="red")
        raise typer.Exit(2) from None
    operator = by or getpass.getuser()
    typer.echo(
        _run(
            resolve_cli(
                _settings(), payment, approved=approved, reference=reference, operator=operator
            )
        )
    )


# --- kept provider events: the operator's redelivery (issue 7 review)
unmatched_app = typer.Typer(no_args_is_help=True, help="Provider events kept for review.")
app.add_typer(unmatched_app, name="unmatched")


@unmatched_app.command("replay")
def unmatched_replay(
    event_id: Annotated[str, typer.Argument(help="Id of a row in unmatched_provider_events")],
) -> None:
    """Land that event's stored delivery again, as a provider redelivery would (after
    assigning the address, registering the token or raising the limit). Prints one
    line per event: stored id, result, reason."""
    from payflow.ingress.replay import replay_unmatched

    trace_id, landings = _run(replay_unmatched(_settings(), event_id))
    for landing in landings:
        reason = landing.reason.value if landing.reason is not None else ""
        typer.echo(f"{landing.event_id}\t{landing.result.value}\t{reason}")
    console.print(f"replayed as trace {trace_id}")


# --- token registry (issue 7): which asset and decimals a chain's transfer moves
tokens_app = typer.Typer(no_args_is_help=True, help="The token registry per chain.")
app.add_typer(tokens_app, name="tokens")


def _print_token(row: Any) -> None:
    contract = row.contract or "native"
    typer.echo(f"{row.chain}\t{contract}\t{row.asset}\t{row.decimals}")


@tokens_app.command("add")
def tokens_add(
    chain: Annotated[str, typer.Argument(help="Chain, e.g. ETH_MAINNET")],
    contract: Annotated[str, typer.Argument(help="Contract address, 0x + 40 hex digits")],
    asset: Annotated[str, typer.Argument(help="Asset code in assets, e.g. USDC")],
    decimals: Annotated[int, typer.Argument(help="The contract's decimals (<= asset scale)")],
) -> None:
    """Register a token: deposits from CONTRACT on CHAIN credit ASSET with DECIMALS."""
    from payflow.ingress.registry import add_token_cli

    row = _run(add_token_cli(_settings(), chain, contract, asset, decimals))
    _print_token(row)
    console.print("registered" if row.created else "already registered")


@tokens_app.command("add-chain")
def tokens_add_chain(
    chain: Annotated[str, typer.Argument(help="Chain, e.g. BASE_MAINNET")],
    asset: Annotated[str, typer.Argument(help="Native asset code in assets, e.g. ETH")],
    decimals: Annotated[int, typer.Argument(help="Native decimals (<= asset scale)")],
) -> None:
    """Register a chain and its native asset (more EVM chains are data, not code)."""
    from payflow.ingress.registry import add_chain_cli

    row = _run(add_chain_cli(_settings(), chain, asset, decimals))
    _print_token(row)
    console.print("registered" if row.created else "already registered")


@tokens_app.command("list")
def tokens_list(
    chain: Annotated[str | None, typer.Option(help="Only this chain")] = None,
) -> None:
    """Print chain, contract (or native), asset and decimals, one per line."""
    from payflow.ingress.registry import list_tokens_cli

    for row in _run(list_tokens_cli(_settings(), chain)):
        _print_token(row)


def main() -> None:
    """Entry point of the `payflow` console script."""
    app()
