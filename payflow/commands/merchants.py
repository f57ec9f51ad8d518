"""`payflow merchants`: merchants and their API keys."""

from __future__ import annotations

from typing import Annotated

import typer

from payflow.commands.common import _run, _settings, console

merchants_app = typer.Typer(no_args_is_help=True, help="Merchants and their API keys.")


@merchants_app.command("create")
def merchants_create(
    name: Annotated[str, typer.Argument(help="Merchant name")],
    admin: Annotated[bool, typer.Option("--admin", help="Grant operator endpoints")] = False,
) -> None:
    """Create a merchant and print its API key and webhook signing secret, once."""
    from payflow.api.auth import MERCHANT_NAME_RULE, valid_merchant_name
    from payflow.api.server import create_merchant_cli

    if not valid_merchant_name(name):
        console.print(f"payflow: {MERCHANT_NAME_RULE}", style="red")
        raise typer.Exit(2)
    merchant_id, key, secret = _run(create_merchant_cli(_settings(), name, admin=admin))
    typer.echo(f"merchant_id={merchant_id}")
    typer.echo(f"api_key={key}")
    typer.echo(f"webhook_secret={secret}")
    console.print("store both now: payflow keeps only a hash of the API key")
