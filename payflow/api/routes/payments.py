"""Merchant payments: create (idempotent, 202), read, list with a cursor."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import Depends, Header, Query, Request
from pydantic import AwareDatetime, BeforeValidator

from payflow.api.auth import CurrentMerchant
from payflow.api.checks import (
    Uuid,
    check_metadata,
    decimal_integer_text,
    floats_round_trip,
    rfc3339_text,
    utc_bound,
)
from payflow.api.cursors import decode_cursor, encode_cursor, listing_digest
from payflow.api.db import connection
from payflow.api.errors import FieldError
from payflow.api.headers import idempotency_key_once, strip_ows
from payflow.api.responses import JsonResponse, iso, wire_amount
from payflow.api.routing import api_router
from payflow.api.schemas import (
    COMMON_PROBLEMS,
    PaymentAccepted,
    PaymentCreate,
    PaymentPage,
    PaymentView,
    problem_responses,
)
from payflow.api.state import api_state
from payflow.db.tx import StatementBounds
from payflow.errors import BadInput
from payflow.idempotency.records import KEY_PATTERN, is_key_race, request_hash
from payflow.money import parse_amount, scale_of
from payflow.payments.service import (
    CREATE_SCOPE,
    NewPayment,
    create_payment,
    get_payment,
    list_payments,
)
from payflow.webhooks.ssrf import check_webhook_url

router = api_router(prefix="/api/v1/payments", tags=["payments"])
IdempotencyKey = Annotated[
    str,
    BeforeValidator(strip_ows),
    Header(alias="Idempotency-Key", pattern=KEY_PATTERN, description="Unique per request intent"),
]


async def _validated(request: Request, body: PaymentCreate) -> NewPayment:
    """The request as a `NewPayment`; `FieldError` (422) naming the first bad field.

    Metadata is stored exactly as sent or refused: `PaymentCreate` refuses non-finite
    numbers, integers beyond 64 bits and NUL; here a decimal literal that its float
    would change (`0.10000000000000000001`) is refused from the raw body.
    """
    settings = api_state(request).settings
    if body.currency not in settings.fiat_currencies:
        allowed = ", ".join(settings.fiat_currencies)
        raise FieldError("body.currency", f"must be one of: {allowed}")
    try:
        amount = parse_amount(body.amount, scale_of(body.currency))
    except BadInput as error:
        raise FieldError("body.amount", str(error)) from None
    if check_metadata(body.metadata) and not floats_round_trip(await request.body()):
        raise FieldError(
            "body.metadata",
            "numbers in metadata must be stored exactly; send this value as a string",
        )
    if body.description is not None and "\x00" in body.description:
        raise FieldError("body.description", "must not hold NUL characters (\\u0000)")
    try:
        metadata_size = len(orjson.dumps(body.metadata))
    except orjson.JSONEncodeError:
        raise FieldError("body.metadata", "must be JSON-encodable Unicode") from None
    if metadata_size > settings.max_metadata_bytes:
        raise FieldError(
            "body.metadata", f"must encode to at most {settings.max_metadata_bytes} bytes"
        )
    if body.webhook_url is not None:
        try:
            check_webhook_url(
                body.webhook_url, settings.webhook_allow_hosts, settings.webhook_nat64_prefixes
            )
        except BadInput as error:
            raise FieldError("body.webhook_url", str(error)) from None
    return NewPayment(amount, body.currency, body.description, body.metadata, body.webhook_url)


@router.post(
    "",
    status_code=202,
    response_model=PaymentAccepted,
    responses=problem_responses(400, 415, 409, *COMMON_PROBLEMS),
    summary="Create a payment (idempotent per merchant and Idempotency-Key)",
    dependencies=[Depends(idempotency_key_once)],
)
async def create(
    request: Request,
    body: PaymentCreate,
    merchant: CurrentMerchant,
    idempotency_key: IdempotencyKey,
) -> JsonResponse:
    """Answer 202 with the pending payment; a same-key, same-body retry gets the same answer."""
    state = api_state(request)
    payment = await _validated(request, body)
    req_hash = request_hash(CREATE_SCOPE, body.model_dump(mode="json"))
    trace_id: str = request.state.trace_id
    for attempt in (1, 2):
        try:
            # One statement, its own transaction (`create_payment`): the limit check
            # (above max_payment answers 422 naming the limit), the key and the
            # inserts commit or fail together.
            try:
                async with connection(state.pool) as conn:
                    response = await create_payment(
                        conn,
                        merchant.id,
                        payment,
                        idempotency_key=idempotency_key,
                        request_hash=req_hash,
                        trace_id=trace_id,
                        bounds=StatementBounds.of(state.settings),
                        notify=False,
                    )
            finally:
                # Wake the relay (coalesced, `outbox.waker`) whatever the outcome: a
                # timeout or a lost connection may follow a statement that committed, and
                # a spurious wake-up costs nothing.
                state.waker.poke()
            return JsonResponse(response.body, status_code=response.status)
        except Exception as exc:
            # A concurrent request committed this key between our read and our insert;
            # the second pass sees its record and replays (or reports the mismatch).
            if attempt == 1 and is_key_race(exc):
                continue
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def payment_view(row: Any) -> dict[str, Any]:
    """The wire form of a payments row (every field the seed contract lists)."""
    return {
        "payment_id": str(row["id"]),
        "amount": wire_amount(row["amount"], row["currency"]),
        "currency": row["currency"],
        "description": row["description"],
        "metadata": row["metadata"],
        "status": row["status"],
        "idempotency_key": row["idempotency_key"],
        "webhook_url": row["webhook_url"],
        "webhook_delivered_at": iso(row["webhook_delivered_at"]),
        "webhook_attempts": row["webhook_attempts"],
        "created_at": iso(row["created_at"]),
        "processed_at": iso(row["processed_at"]),
    }


@router.get(
    "/{payment_id}",
    response_model=PaymentView,
    responses=problem_responses(404, *COMMON_PROBLEMS),
    summary="Read one payment",
)
async def read(request: Request, payment_id: Uuid, merchant: CurrentMerchant) -> JsonResponse:
    """Another merchant's payment is indistinguishable from an unknown id: 404."""
    state = api_state(request)
    async with connection(state.pool) as conn:
        row = await get_payment(conn, merchant.id, payment_id)
    return JsonResponse(payment_view(row))


@router.get(
    "",
    response_model=PaymentPage,
    responses=problem_responses(*COMMON_PROBLEMS),
    summary="List payments, newest first, with cursor pagination",
)
async def list_(
    request: Request,
    merchant: CurrentMerchant,
    status: Annotated[str | None, Query(pattern="^(pending|succeeded|failed)$")] = None,
    created_from: Annotated[
        AwareDatetime | None, BeforeValidator(rfc3339_text), Query(description="inclusive")
    ] = None,
    created_to: Annotated[
        AwareDatetime | None, BeforeValidator(rfc3339_text), Query(description="exclusive")
    ] = None,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, BeforeValidator(decimal_integer_text), Query(ge=1, le=200)] = 50,
) -> JsonResponse:
    """Pages follow (created_at, payment_id) descending; `next_cursor` is null on the last."""
    state = api_state(request)
    try:
        lower, upper = utc_bound(created_from), utc_bound(created_to)
    except ValueError as error:
        raise FieldError("query.created_from/created_to", str(error)) from None
    listing = listing_digest("payments", status=status, created_from=lower, created_to=upper)
    after = decode_cursor(cursor, listing) if cursor else None
    async with connection(state.pool) as conn:
        rows = await list_payments(
            conn,
            merchant.id,
            status=status,
            created_from=lower,
            created_to=upper,
            after=after,
            limit=limit + 1,
        )
    page = rows[:limit]
    next_cursor = (
        encode_cursor(page[-1]["created_at"], page[-1]["id"], listing)
        if len(rows) > limit
        else None
    )
    return JsonResponse({"items": [payment_view(row) for row in page], "next_cursor": next_cursor})
