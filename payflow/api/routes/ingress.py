"""Provider webhook ingress, authenticated by its HMAC signature alone."""

from __future__ import annotations

from fastapi import Request

from payflow.api.db import connection
from payflow.api.errors import ApiProblem
from payflow.api.headers import sent_more_than_once
from payflow.api.ratelimit import hit
from payflow.api.responses import JsonResponse
from payflow.api.routing import api_router
from payflow.api.schemas import IngressAccepted, problem_responses
from payflow.api.state import api_state
from payflow.db.tx import transaction
from payflow.ingress import signature
from payflow.ingress.formats import parse_payload
from payflow.ingress.payloads import InvalidPayload
from payflow.ingress.rawjson import NotJson, decode_body
from payflow.ingress.service import Delivery, land_event

router = api_router(prefix="/api/v1/webhooks", tags=["provider webhooks"])
# Its bodies are capped by PROVIDER_MAX_BODY_BYTES, not MAX_BODY_BYTES (see app.py).
PROVIDER_WEBHOOK_PATH = "/api/v1/webhooks/provider"

REQUEST_BODY_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": (
                        "Either payflow's generic event {event_id, event_type, to_address,"
                        " asset, amount (string), tx_hash, chain?, contract_address?} or an"
                        " Alchemy ADDRESS_ACTIVITY webhook. Only a bad signature (401) or a"
                        " body that is not JSON (422) is refused; anything payflow cannot"
                        " credit is kept for review and answered `unmatched` with a reason."
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

    Each activity stands alone: what cannot be credited (unknown address or token, NFT,
    zero value, malformed fields, NUL characters, an ambiguous id) is kept in
    `unmatched_provider_events` with its reason and answered 202 `unmatched`, while the
    rest of the delivery is credited. A duplicate delivery writes nothing new, so a
    provider never needs to retry forever. `events[].event_id` is the stored id, in the
    provider's namespace (`gen:`, `alchemy:`).
    """
    state = api_state(request)
    settings = state.settings
    client = request.client.host if request.client is not None else "unknown"
    await hit(
        state.redis, settings.redis_key_prefix, f"ip:{client}", settings.rate_limit_per_minute
    )
    body = await request.body()
    header = request.headers.get(settings.provider_signature_header)
    once = not sent_more_than_once(request, settings.provider_signature_header)
    if not once or not signature.verify(body, header, state.provider_secret):
        raise ApiProblem(401, "Unauthorized", "missing or invalid signature", slug="bad-signature")
    try:
        payload = decode_body(body)
    except NotJson:
        raise InvalidPayload("body", "is not valid JSON") from None
    events = parse_payload(payload, settings.default_chain)
    delivery = Delivery(body)
    trace_id: str = request.state.trace_id
    results: list[dict[str, str]] = []
    async with connection(state.pool) as conn, transaction(conn, settings):
        for event in events:
            landing = await land_event(conn, event, trace_id, delivery=delivery)
            result = {"event_id": landing.event_id, "result": landing.result.value}
            if landing.reason is not None:
                result["reason"] = landing.reason.value
            results.append(result)
    return JsonResponse(
        {"status": "accepted", "trace_id": trace_id, "events": results}, status_code=202
    )
