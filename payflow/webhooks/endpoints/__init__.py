"""Webhook endpoints per merchant: each merchant event delivered to every enabled endpoint
that wants its type (`merchant_event_record`, migration 0039), signed per Standard
Webhooks with the endpoint's own secret (two signatures during a rotation's overlap), with
a delivery log, audited redelivery, a sweep for lost deliveries, the DLQ, and the
auto-disable of endpoints that only fail. See docs/webhooks.md."""

from payflow.webhooks.endpoints.dead import ENDPOINT_DEAD_LETTERER, replay_delivery
from payflow.webhooks.endpoints.sender import EndpointSender, delivery_headers
from payflow.webhooks.endpoints.store import (
    MAX_DESCRIPTION,
    MAX_ENDPOINTS,
    Scope,
    attempts_by_delivery,
    checked_description,
    create_endpoint,
    delete_endpoint,
    deliveries_of_endpoint,
    deliveries_of_event,
    endpoint_position,
    get_endpoint,
    list_endpoints,
    redeliver,
    redeliveries_of_event,
    rotate_secret,
    update_endpoint,
    valid_events,
)

__all__ = [
    "ENDPOINT_DEAD_LETTERER",
    "MAX_DESCRIPTION",
    "MAX_ENDPOINTS",
    "EndpointSender",
    "Scope",
    "attempts_by_delivery",
    "checked_description",
    "create_endpoint",
    "delete_endpoint",
    "deliveries_of_endpoint",
    "deliveries_of_event",
    "delivery_headers",
    "endpoint_position",
    "get_endpoint",
    "list_endpoints",
    "redeliver",
    "redeliveries_of_event",
    "replay_delivery",
    "rotate_secret",
    "update_endpoint",
    "valid_events",
]
