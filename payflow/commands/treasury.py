"""`payflow treasury`: the owners' treasury addresses that sweeps may go to."""

from __future__ import annotations

from typing import Annotated

import typer

from payflow.commands.common import _run, _settings, console

treasury_app = typer.Typer(no_args_is_help=True, help="The owners' treasury addresses.")

By = Annotated[str, typer.Option("--by", help="Who registers it (audited)")]


@treasury_app.command("add")
def treasury_add(
    chain: Annotated[str, typer.Argument(help="Chain, e.g. ETH_MAINNET")],
    address: Annotated[str, typer.Argument(help="0x + 40 hex digits (EIP-55 if mixed case)")],
    by: By = "operator",
) -> None:
    """Register ADDRESS on CHAIN: outflows to it are booked as sweeps, not mismatches."""
    from payflow.chain.treasury import add_treasury

    try:
        checked, created = _run(add_treasury(_settings().database, chain, address, by))
    except ValueError as error:
        console.print(f"treasury add: {address}: {error}")
        raise typer.Exit(2) from None
    console.print(f"{chain}\t{checked}\t{'registered' if created else 'already registered'}")


@treasury_app.command("remove")
def treasury_remove(
    chain: Annotated[str, typer.Argument(help="Chain")],
    address: Annotated[str, typer.Argument(help="The registered address")],
    by: By = "operator",
) -> None:
    """Unregister ADDRESS on CHAIN (the row stays, with who removed it and when)."""
    from payflow.chain.treasury import remove_treasury

    try:
        removed = _run(remove_treasury(_settings().database, chain, address, by))
    except ValueError as error:
        console.print(f"treasury remove: {address}: {error}")
        raise typer.Exit(2) from None
    if not removed:
        console.print(f"treasury remove: {address} is not registered on {chain}")
        raise typer.Exit(1)
    console.print(f"{chain}\t{address.lower()}\tremoved")


@treasury_app.command("list")
def treasury_list() -> None:
    """Every treasury address, registered and removed, with who and when."""
    from payflow.chain.treasury import list_treasury

    for r in _run(list_treasury(_settings().database)):
        removed = (
            f"removed {r['removed_at']:%Y-%m-%dT%H:%M:%SZ} by {r['removed_by']}"
            if r["removed_at"]
            else "active"
        )
        console.print(
            f"{r['chain']}\t{r['address']}\tadded {r['added_at']:%Y-%m-%dT%H:%M:%SZ}"
            f" by {r['added_by']}\t{removed}"
        )
