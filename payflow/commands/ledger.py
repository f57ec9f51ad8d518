"""`payflow ledger`: the books (the chart of payflow's own accounts and their balances)."""

from __future__ import annotations

from typing import Any

import typer

from payflow.commands.common import _run, _settings

ledger_app = typer.Typer(no_args_is_help=True, help="The double-entry books.")


@ledger_app.command("accounts")
def ledger_accounts() -> None:
    """Print the chart of accounts: each of payflow's own accounts with its kind, normal
    side, balance (summed from the journal, on its normal side) and number of legs, then
    per asset what customers' and merchants' accounts hold."""
    from payflow.db.pool import tool_pool
    from payflow.ledger.books import chart_of_accounts, customer_totals
    from payflow.money import format_amount

    settings = _settings()

    async def read() -> tuple[list[Any], list[Any]]:
        async with tool_pool(settings.database) as pool, pool.acquire() as conn:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                return await chart_of_accounts(conn), await customer_totals(conn)

    chart, customers = _run(read())
    typer.echo("account\tkind\tnormal_side\tasset\tbalance\tlegs")
    for account in chart:
        typer.echo(
            f"{account.code}\t{account.kind}\t{account.normal_side}\t{account.asset}\t"
            f"{format_amount(account.balance)}\t{account.legs}"
        )
    for total in customers:
        typer.echo(
            f"customers:{total.asset}\tcustomer\tcredit\t{total.asset}\t"
            f"{format_amount(total.balance)}\t{total.accounts} accounts"
        )
