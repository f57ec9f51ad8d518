"""`payflow alerts`: list and acknowledge open alerts."""

from __future__ import annotations

from typing import Annotated

import typer

from payflow.commands.common import OPERATOR_MAX, _run, _settings, bounded_option, console

alerts_app = typer.Typer(no_args_is_help=True, help="Open alerts: list and acknowledge.")


@alerts_app.command("list")
def alerts_list(
    all_rows: Annotated[bool, typer.Option("--all", help="Include resolved alerts")] = False,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 100,
) -> None:
    """List alerts: open first, most severe first, newest first."""
    from payflow.alerts.cli import print_list

    settings = _settings()
    _run(
        print_list(
            settings.alerts,
            database=settings.database,
            include_resolved=all_rows,
            limit=limit,
        )
    )


@alerts_app.command("ack")
def alerts_ack(
    key: Annotated[str, typer.Argument(help="Alert key, e.g. recon.mismatch:hot")],
    by: Annotated[str, typer.Option("--by", help="Operator recorded as acknowledged_by")] = "",
) -> None:
    """Acknowledge the open alert KEY (records who); its reminders stop until it resolves."""
    import getpass

    from payflow.alerts.cli import acknowledge

    operator = bounded_option(by, "--by", OPERATOR_MAX) or getpass.getuser()
    settings = _settings()
    row = _run(acknowledge(settings.alerts, key, operator, database=settings.database))
    if row is None:
        console.print(f"payflow: no open alert {key!r}", style="red")
        raise typer.Exit(1)
    console.print(f"alert {key}: acknowledged by {row.acknowledged_by} at {row.acknowledged_at}")
