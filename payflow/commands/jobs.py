"""`payflow jobs` (maintenance jobs and their last runs) and `payflow status`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from payflow.commands.common import _run, _settings, console

# --- jobs and status (docs/operations.md)
jobs_app = typer.Typer(no_args_is_help=True, help="Maintenance jobs and their last runs.")


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
        console.print(f"payflow: {UnknownJob(name)}", style="red")
        raise typer.Exit(2)
    settings = _settings()
    configure_logging(settings.observability)  # logs to stderr: stdout carries the result
    if not _run(run_by_hand(settings, name, Console(soft_wrap=True))):
        raise typer.Exit(1)


# Registered on the root app by payflow.cli (`payflow status`).
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Machine output (JSON)")] = False,
    cluster: Annotated[
        bool,
        typer.Option(
            "--cluster",
            help="PostgreSQL nodes (primary, standbys, replication lag) and broker nodes;"
            " needs no working primary",
        ),
    ] = False,
) -> None:
    """Is the money right, and is it flowing? Exit 1 when something is wrong."""
    from payflow.observability import configure_logging
    from payflow.ops.cluster import print_cluster
    from payflow.ops.status import print_status

    settings = _settings()
    configure_logging(settings.observability)  # logs to stderr: stdout carries the status
    show = print_cluster if cluster else print_status
    if not _run(show(settings, as_json=as_json)):
        raise typer.Exit(1)
