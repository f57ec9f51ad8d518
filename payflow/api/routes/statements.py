"""An account's statement for a period, as JSON or CSV (`Accept: text/csv`).

The statement comes from the journal (`payflow.ledger.history.statement`): the opening
balance at `from`, every movement with `from < at <= to` with the account on the other
side of its posting, and the closing balance at `to`, read in one snapshot. A period with
more than `STATEMENT_MAX_MOVEMENTS` movements is refused (422): the client splits it.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Query, Request
from pydantic import AwareDatetime, BeforeValidator
from starlette.responses import Response

from payflow.api.auth import CurrentMerchant
from payflow.api.checks import Uuid, rfc3339_text
from payflow.api.db import connection
from payflow.api.errors import FieldError
from payflow.api.responses import JsonResponse, iso, wire_amount
from payflow.api.routes.accounts import Instant, owned_account, past_instant
from payflow.api.routing import api_router
from payflow.api.schemas import COMMON_PROBLEMS, StatementView, problem_responses
from payflow.api.state import api_state
from payflow.errors import BadInput
from payflow.ledger.history import Statement, statement

router = api_router(prefix="/api/v1", tags=["accounts"])
STATEMENT_MAX_MOVEMENTS = 10_000
CSV_MEDIA_TYPE = "text/csv"
CSV_HEADER = (
    "at",
    "amount",
    "balance_after",
    "kind",
    "counterparty",
    "counterparty_kind",
    "reference",
)
# A cell a spreadsheet would read as a formula (OWASP "CSV injection"): text starting with
# one of these gets a leading apostrophe. Amounts are never prefixed: they are decimal
# strings payflow wrote (digits, one '.', a leading '-' for a debit), never a formula.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def wants_csv(accept: str | None) -> bool:
    """True when the Accept header prefers `text/csv` to JSON (by q-value; JSON on a tie,
    and when there is no Accept header)."""
    if not accept:
        return False
    csv_q = json_q = 0.0
    for item in accept.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        media = media.lower()
        if media == CSV_MEDIA_TYPE:
            csv_q = max(csv_q, q)
        elif media in ("application/json", "application/*", "*/*"):
            json_q = max(json_q, q)
    return csv_q > json_q


def safe_cell(value: str | None) -> str:
    """A text cell that no spreadsheet runs as a formula."""
    if value is None:
        return ""
    return "'" + value if value.startswith(FORMULA_START) else value


def statement_json(st: Statement, asset: str) -> dict[str, Any]:
    return {
        "account_id": str(st.account_id),
        "asset": asset,
        "from": iso(st.start),
        "to": iso(st.end),
        "opening_balance": wire_amount(st.opening, asset),
        "closing_balance": wire_amount(st.closing, asset),
        "movements": [
            {
                "at": iso(m.at),
                "amount": wire_amount(m.amount, asset),
                "balance_after": wire_amount(m.balance_after, asset),
                "kind": m.kind,
                "counterparty": m.counterparty,
                "counterparty_kind": m.counterparty_kind,
                "reference": m.reference,
            }
            for m in st.movements
        ],
    }


def statement_csv(st: Statement, asset: str) -> str:
    """RFC 4180: a header row, CRLF line ends, fields quoted when they hold a comma, a
    quote or a line break. The first row is the opening balance (kind `opening_balance`),
    the last the closing balance (`closing_balance`), each with its balance in
    `balance_after` and no amount."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_HEADER)
    opening = wire_amount(st.opening, asset)
    writer.writerow([iso(st.start), "", opening, "opening_balance", "", "", ""])
    for m in st.movements:
        writer.writerow(
            [
                iso(m.at),
                wire_amount(m.amount, asset),
                wire_amount(m.balance_after, asset),
                safe_cell(m.kind),
                safe_cell(m.counterparty),
                safe_cell(m.counterparty_kind),
                safe_cell(m.reference),
            ]
        )
    closing = wire_amount(st.closing, asset)
    writer.writerow([iso(st.end), "", closing, "closing_balance", "", "", ""])
    return out.getvalue()


@router.get(
    "/accounts/{account_id}/statement",
    response_model=StatementView,
    responses={
        200: {
            "content": {
                CSV_MEDIA_TYPE: {
                    "schema": {"type": "string"},
                    "example": "at,amount,balance_after,kind,counterparty,counterparty_kind,"
                    "reference\r\n",
                }
            },
            "description": "JSON, or CSV with `Accept: text/csv`",
        },
        **problem_responses(404, *COMMON_PROBLEMS),
    },
    summary="An account's statement for a period: opening balance, movements, closing",
)
async def account_statement(
    request: Request,
    account_id: Uuid,
    merchant: CurrentMerchant,
    start: Annotated[
        AwareDatetime,
        BeforeValidator(rfc3339_text),
        Query(
            alias="from",
            description="RFC 3339 with an offset, exclusive, not in the future: the opening"
            " balance is the balance at this instant",
        ),
    ],
    end: Annotated[
        Instant,
        Query(
            alias="to",
            description="RFC 3339 with an offset, inclusive, not in the future (default: now):"
            " the closing balance is the balance at this instant",
        ),
    ] = None,
) -> Response:
    """Movements are the account's legs with from < at <= to, oldest first, each with the
    account on the other side of its posting. More than 10,000 movements: 422, ask for a
    shorter period. Another merchant's account answers 404.

    CSV is chosen when Accept prefers text/csv to application/json (see `wants_csv`);
    text cells starting with = + - @ (or a tab or CR) get a leading apostrophe."""
    lower = past_instant(start, "query.from")
    upper = past_instant(end, "query.to") or datetime.now(UTC)
    assert lower is not None
    if lower >= upper:
        raise FieldError("query.from", "must be before `to` (which defaults to now)")
    state = api_state(request)
    async with connection(state.pool) as conn:
        account = await owned_account(conn, account_id, merchant)
        try:
            st = await statement(
                conn,
                state.settings,
                account_id,
                lower,
                upper,
                max_movements=STATEMENT_MAX_MOVEMENTS,
            )
        except BadInput as error:  # StatementTooLong among them
            raise FieldError("query.from", str(error)) from None
    asset = account["asset"]
    if wants_csv(request.headers.get("accept")):
        filename = f"statement-{account_id}.csv"
        return Response(
            statement_csv(st, asset),
            media_type=f"{CSV_MEDIA_TYPE}; charset=utf-8",
            headers={
                "Content-Disposition": f'attachment; filename="{filename}"',
                "Vary": "Accept",
            },
        )
    return JsonResponse(statement_json(st, asset), headers={"Vary": "Accept"})
