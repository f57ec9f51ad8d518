"""`payflow wallet`: the payout hot wallet(s) (docs/payouts.md)."""

from __future__ import annotations

import json

import typer

from payflow.commands.common import _run, _settings

wallet_app = typer.Typer(no_args_is_help=True, help="The payout hot wallet(s).")


@wallet_app.command("status")
def wallet_status() -> None:
    """Balances, nonces (payflow's next, the chain's), pending and stuck payout
    transactions, and payouts waiting for funds; JSON on stdout. Never prints a key."""
    from payflow.chain.payouts.wallet import wallet_status_cli

    settings = _settings()
    report = _run(
        wallet_status_cli(settings.payouts, chains=settings.chain, database=settings.database)
    )
    typer.echo(json.dumps(report, indent=2))
