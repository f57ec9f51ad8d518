"""`payflow assets`: assets and their per-operation limits."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from payflow.commands.common import _run, _settings, console

# --- assets (per-asset limits)
assets_app = typer.Typer(no_args_is_help=True, help="Assets and their per-operation limits.")


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
        async with tool_pool(settings.database, operator=True) as pool, pool.acquire() as conn:
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
