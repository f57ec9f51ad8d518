"""`payflow ledger`: the books (the chart of payflow's own accounts and their balances)."""

from __future__ import annotations

import getpass
import json
import re
from typing import Annotated, Any, NoReturn

import typer

from payflow.commands.common import (
    NOTE_MAX,
    OPERATOR_MAX,
    _run,
    _settings,
    bounded_option,
    console,
)

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


SIGNED_AMOUNT = re.compile(r"^[+-]?[0-9]+(\.[0-9]+)?$")


def _fail(message: str) -> NoReturn:
    console.print(f"payflow: {message}", style="red")
    raise typer.Exit(2)


# `ignore_unknown_options`: a negative AMOUNT ("-5") is an argument, not an unknown option.
@ledger_app.command("adjust", context_settings={"ignore_unknown_options": True})
def ledger_adjust(
    account: Annotated[
        str, typer.Argument(help="A customer/merchant account id or a system account code")
    ],
    amount: Annotated[str, typer.Argument(help="Signed decimal: the change of ACCOUNT's balance")],
    against: Annotated[
        str,
        typer.Option(
            "--against", help="The system account on the other side, e.g. adjustments:USD"
        ),
    ] = "",
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded in the audit)")] = "",
    by: Annotated[str, typer.Option("--by", help="Operator name recorded in the audit")] = "",
    reference: Annotated[
        str | None,
        typer.Option("--reference", help="Idempotency reference: the same one twice adjusts once"),
    ] = None,
) -> None:
    """Post an operator adjustment: AMOUNT (signed) changes ACCOUNT's balance on its normal
    side, the opposite leg goes to the system account --against (same asset). One balanced
    transfer `adjustment` with an append-only audit row; never an edit of a row. Refused
    (exit 2) when a customer balance would fall below its held amount or go negative, or
    the assets differ. Prints the adjustment as JSON."""
    import uuid
    from decimal import Decimal

    from payflow.db.pool import tool_pool
    from payflow.db.tx import transaction
    from payflow.ledger.moves import Adjustment, AdjustmentRefused, adjust
    from payflow.money import format_amount

    if SIGNED_AMOUNT.fullmatch(amount) is None:
        _fail(f"AMOUNT must be a signed decimal string such as 10.50 or -3, not {amount!r}")
    value = Decimal(amount)
    if value == 0:
        _fail("AMOUNT must not be zero")
    if not against:
        _fail("--against is required: the system account on the other side")
    reason = bounded_option(reason, "--reason", NOTE_MAX).strip()
    if not reason:
        _fail("--reason is required: say why")
    operator = bounded_option(by, "--by", OPERATOR_MAX).strip() or getpass.getuser()
    ref = bounded_option(reference, "--reference", 200) if reference is not None else None
    if ref is not None and not ref.strip():
        _fail("--reference must not be empty")
    settings = _settings()

    async def run() -> Adjustment:
        async with tool_pool(settings.database) as pool, pool.acquire() as conn:
            async with transaction(conn, settings.database):
                return await adjust(
                    conn,
                    account,
                    value,
                    against=against,
                    reason=reason,
                    by=operator,
                    reference=ref or f"adj:{uuid.uuid4()}",
                )

    try:
        result = _run(run())
    except AdjustmentRefused as refused:
        _fail(f"adjustment refused: {refused}")
    typer.echo(
        json.dumps(
            {
                "transfer_id": result.transfer_id,
                "reference": result.reference,
                "account": result.account,
                "against": result.against,
                "asset": result.asset,
                "amount": ("-" if result.amount < 0 else "") + format_amount(abs(result.amount)),
                "reason": result.reason,
                "by": result.adjusted_by,
                "created": result.created,
            },
            indent=2,
        )
    )
