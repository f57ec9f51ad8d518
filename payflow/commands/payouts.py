"""`payflow payouts`: payouts that do not progress, and the audited operator actions on
them (docs/payouts.md, "Stalled payouts")."""

from __future__ import annotations

import getpass
import json
from typing import Annotated

import typer

from payflow.commands.common import NOTE_MAX, OPERATOR_MAX, _run, _settings, bounded_option, console

payouts_app = typer.Typer(no_args_is_help=True, help="Payouts that do not progress.")


@payouts_app.command("stalled")
def payouts_stalled() -> None:
    """Open payouts that do not progress (refused by the node, not mined, nonce taken by
    another signer, a receipt that moved the hot wallet's tokens otherwise than the
    payout), with why and for how long; JSON on stdout."""
    from payflow.chain.payouts.actions import stalled_cli

    settings = _settings()
    stalled = _run(stalled_cli(settings.payouts, database=settings.database))
    typer.echo(json.dumps(stalled, indent=2))


def _act(
    action: str, payout_id: str, reason: str, by: str, raise_fee_hold: str | None = None
) -> None:
    from uuid import UUID

    from payflow.chain.payouts.actions import action_cli
    from payflow.chain.payouts.records import PayoutAction

    try:
        payout = UUID(payout_id)
    except ValueError:
        console.print(f"payflow: not a payout id: {payout_id!r}", style="red")
        raise typer.Exit(2) from None
    reason = bounded_option(reason, "--reason", NOTE_MAX).strip()
    if not reason:
        console.print("payflow: --reason is required: say why", style="red")
        raise typer.Exit(2)
    operator = bounded_option(by, "--by", OPERATOR_MAX).strip() or getpass.getuser()
    settings = _settings()
    result = _run(
        action_cli(
            settings.payouts,
            PayoutAction(action),
            payout,
            actor=operator,
            reason=reason,
            raise_fee_hold=raise_fee_hold,
            database=settings.database,
            chains=settings.chain,
            redis_settings=settings.redis,
        )
    )
    typer.echo(json.dumps(result, indent=2))


@payouts_app.command("void")
def payouts_void(
    payout_id: Annotated[str, typer.Argument(help="Payout id")],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded in the audit)")] = "",
    by: Annotated[str, typer.Option("--by", help="Operator name recorded in the audit")] = "",
) -> None:
    """Void a signed/sent payout none of whose transactions was mined: failed, hold
    released, nothing charged. Refused unless the chain shows its nonce used by another
    transaction (or never used, with no later nonce allocated)."""
    _act("void", payout_id, reason, by)


@payouts_app.command("resign")
def payouts_resign(
    payout_id: Annotated[str, typer.Argument(help="Payout id")],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded in the audit)")] = "",
    by: Annotated[str, typer.Option("--by", help="Operator name recorded in the audit")] = "",
    raise_fee_hold: Annotated[
        str | None,
        typer.Option(
            "--raise-fee-hold",
            help="Native payouts: hold this much more of the account's money (its asset,"
            " e.g. 0.005) as the payout's fee, then re-sign offering what the hold allows",
        ),
    ] = None,
) -> None:
    """Sign a signed/sent payout again, none of whose transactions was mined: at a fresh
    nonce when another transaction used its nonce, at the same nonce when it was never
    used; fees of now, capped at the payout's fee hold; then broadcast. With
    --raise-fee-hold the hold is raised first (refused if the account cannot cover it),
    for a payout the fee market priced out while later nonces wait behind it."""
    if raise_fee_hold is not None:
        raise_fee_hold = bounded_option(raise_fee_hold, "--raise-fee-hold", 64).strip()
    _act("resign", payout_id, reason, by, raise_fee_hold)


@payouts_app.command("settle")
def payouts_settle(
    payout_id: Annotated[str, typer.Argument(help="Payout id")],
    outcome: Annotated[
        str, typer.Option("--as", help="confirmed (posted as paid) or failed (hold released)")
    ] = "",
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded in the audit)")] = "",
    by: Annotated[str, typer.Option("--by", help="Operator name recorded in the audit")] = "",
) -> None:
    """Settle a transfer_mismatch payout (its receipt moved the hot wallet's tokens
    otherwise than the payout) once that receipt is final: --as confirmed posts the
    amount and its fee and releases the hold; --as failed releases the hold and charges
    the fee as a failed payout does. Exactly once, audited."""
    from uuid import UUID

    from payflow.chain.payouts.actions_settle import OUTCOMES, settle_cli

    try:
        payout = UUID(payout_id)
    except ValueError:
        console.print(f"payflow: not a payout id: {payout_id!r}", style="red")
        raise typer.Exit(2) from None
    outcome = bounded_option(outcome, "--as", 20).strip()
    if outcome not in OUTCOMES:
        console.print("payflow: --as confirmed or --as failed is required", style="red")
        raise typer.Exit(2)
    reason = bounded_option(reason, "--reason", NOTE_MAX).strip()
    if not reason:
        console.print("payflow: --reason is required: say why", style="red")
        raise typer.Exit(2)
    operator = bounded_option(by, "--by", OPERATOR_MAX).strip() or getpass.getuser()
    settings = _settings()
    result = _run(
        settle_cli(
            settings.payouts,
            payout,
            outcome=outcome,
            actor=operator,
            reason=reason,
            database=settings.database,
            chains=settings.chain,
            redis_settings=settings.redis,
        )
    )
    typer.echo(json.dumps(result, indent=2))
