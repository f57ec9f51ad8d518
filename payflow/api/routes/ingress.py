"""Provider webhook ingress, authenticated by its HMAC signature alone."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request

from payflow.api.db import connection
from payflow.api.errors import ApiProblem
from payflow.api.ratelimit import hit
from payflow.api.responses import JsonResponse
from payflow.api.schemas import IngressAccepted, problem_responses
from payflow.api.state import api_state
from payflow.db.tx import transaction
from payflow.ingress import signature
from payflow.ingress.payloads import InvalidPayload, parse_payload
from payflow.ingress.service import check_event_id, land_event

router = APIRouter(prefix="/api/v1/webhooks", tags=["provider webhooks"])

REQUEST_BODY_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": (
                        "Either payflow's generic event {event_id, event_type, to_address,"
                        " asset, amount (string), tx_hash, chain?} or an Alchemy"
                        " ADDRESS_ACTIVITY webhook."
                    ),
                }
            }
        },
    },
    "parameters": [
        {
            "name": "X-Alchemy-Signature",
            "in": "header",
            "required": True,
            "description": "Hex HMAC-SHA256 of the raw body (header name is configurable)",
            "schema": {"type": "string"},
        }
    ],
}


@router.post(
    "/provider",
    status_code=202,
    response_model=IngressAccepted,
    responses=problem_responses(401, 413, 422, 429, 503),
    openapi_extra=REQUEST_BODY_DOC,
    summary="Receive provider deposit events (signed; no API key)",
)
async def provider_webhook(request: Request) -> JsonResponse:
    """Verify the signature over the raw bytes, then land every event in one transaction.

    Unknown addresses are kept as unmatched and still answered 202, and a duplicate
    delivery writes nothing new, so a provider never needs to retry forever.
    """
    state = api_state(request)
    settings = state.settings
    client = request.client.host if request.client is not None else "unknown"
    await hit(
        state.redis, settings.redis_key_prefix, f"ip:{client}", settings.rate_limit_per_minute
    )
    body = await request.body()
    header = request.headers.get(settings.provider_signature_header)
    if not signature.verify(body, header, state.provider_secret):
        raise ApiProblem(401, "Unauthorized", "missing or invalid signature", slug="bad-signature")
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InvalidPayload("body", "is not valid JSON") from None
    events = parse_payload(payload, settings.default_chain)
    generic = not (isinstance(payload, dict) and payload.get("type") == "ADDRESS_ACTIVITY")
    if generic:
        check_event_id(events[0].event_id)
    trace_id: str = request.state.trace_id
    async with connection(state.pool) as conn, transaction(conn, settings):
        results = [
            {
                "event_id": event.event_id,
                "result": (await land_event(conn, event, trace_id, strict_amount=generic)).value,
            }
            for event in events
        ]
    return JsonResponse(
        {"status": "accepted", "trace_id": trace_id, "events": results}, status_code=202
    )
