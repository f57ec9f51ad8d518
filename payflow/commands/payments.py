"""`payflow payments`: charges waiting for an operator."""

from __future__ import annotations

from typing import Annotated

import typer

from payflow.commands.common import (
    OPERATOR_MAX,
    REFERENCE_MAX,
    _run,
    _settings,
    bounded_option,
    console,
)

# --- payments: charges whose gateway outcome is unknown (docs/pipeline.md)
payments_app = typer.Typer(no_args_is_help=True, help="Charges waiting for an operator.")


@payments_app.command("review")
def payments_review(limit: Annotated[int, typer.Option(min=1, max=10_000)] = 100) -> None:
    """List charges parked as needs_review (payment pending, gateway outcome unknown)."""
    from payflow.payments.review import print_review

    _run(print_review(_settings(), limit))


@payments_app.command("resolve")
def payments_resolve(
    payment_id: Annotated[str, typer.Argument(help="Payment id")],
    approved: Annotated[
        bool, typer.Option("--approved", help="The gateway's records show the charge approved")
    ] = False,
    declined: Annotated[
        bool, typer.Option("--declined", help="The gateway's records show the charge declined")
    ] = False,
    reference: Annotated[str, typer.Option(help="The gateway's id of the charge")] = "",
    by: Annotated[str, typer.Option("--by", help="Operator name recorded on the attempt")] = "",
) -> None:
    """Record a charge's outcome read from the gateway's own records; finalizes the payment."""
    import getpass
    from uuid import UUID

    from payflow.payments.review import resolve_cli

    if approved == declined:
        # Exactly one: a flag pair would let the last of "--approved --declined" win
        # silently, and this records money's outcome.
        console.print("payflow: give exactly one of --approved or --declined", style="red")
        raise typer.Exit(2)
    try:
        payment = UUID(payment_id)
    except ValueError:
        console.print(f"payflow: not a payment id: {payment_id!r}", style="red")
        raise typer.Exit(2) from None
    reference = bounded_option(reference, "--reference", REFERENCE_MAX)
    operator = bounded_option(by, "--by", OPERATOR_MAX) or getpass.getuser()
    typer.echo(
        _run(
            resolve_cli(
                _settings(), payment, approved=approved, reference=reference, operator=operator
            )
        )
    )
