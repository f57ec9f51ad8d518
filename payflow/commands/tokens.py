"""`payflow tokens`: the token registry per chain."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from payflow.commands.common import _run, _settings, console

# --- token registry: which asset and decimals a chain's transfer moves
tokens_app = typer.Typer(no_args_is_help=True, help="The token registry per chain.")


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

    settings = _settings()
    row = _run(
        add_token_cli(settings.chain, chain, contract, asset, decimals, database=settings.database)
    )
    _print_token(row)
    console.print("registered" if row.created else "already registered")


@tokens_app.command("add-chain")
def tokens_add_chain(
    chain: Annotated[str, typer.Argument(help="Chain, e.g. BASE_MAINNET")],
    asset: Annotated[str, typer.Argument(help="Native asset code in assets, e.g. ETH")],
    decimals: Annotated[int, typer.Argument(help="Native decimals (<= asset scale)")],
    chain_id: Annotated[
        int | None,
        typer.Option(
            "--chain-id",
            help="The network's EIP-155 chain id its node must answer (eth_chainId)",
        ),
    ] = None,
) -> None:
    """Register a chain and its native asset (more EVM chains are data, not code)."""
    from payflow.ingress.registry import add_chain_cli

    row = _run(add_chain_cli(_settings(), chain, asset, decimals, chain_id))
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
