"""/openapi.json describes every JSON success answer: a route whose 2xx body has no
schema (FastAPI's `{}` when a route returns a `JsonResponse` without `response_model`)
leaves client generators and readers of the document with nothing, while docs/api.md
promises a shape. Walks every operation, so a route added later is held to it too."""

from __future__ import annotations

from typing import Any

from payflow.app import create_app
from payflow.config import load_settings


def _document() -> dict[str, Any]:
    settings = load_settings(api_key="k" * 16, provider_webhook_secret="s" * 32)
    return create_app(settings).openapi()


def test_every_json_success_answer_has_a_schema() -> None:
    document = _document()
    bare = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, answer in operation["responses"].items():
                if not status.startswith("2"):
                    continue
                content = answer.get("content", {})
                if "application/json" in content and not content["application/json"].get("schema"):
                    bare.append((method.upper(), path, status))
    assert bare == []


def test_the_webhook_delivery_answers_name_their_fields() -> None:
    schemas = _document()["components"]["schemas"]
    assert set(schemas["EndpointPage"]["properties"]) == {"data", "next_after"}
    assert set(schemas["DeliveryPage"]["properties"]) == {"data", "next_before"}
    assert set(schemas["EventDeliveries"]["properties"]) == {"data", "redeliveries"}
    assert set(schemas["RedeliveryAnswer"]["properties"]) == {"redeliveries", "skipped"}
    assert {"state", "attempts", "attempts_count"} <= set(schemas["DeliveryView"]["properties"])
