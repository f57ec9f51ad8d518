"""Every uuid path and query parameter of the API (and a body's `endpoint_id`) takes the
canonical hyphenated 8-4-4-4-12 form only, in either case: Python's `UUID` also read
`{…}` braces, 32 bare hex digits and `urn:uuid:…`, which then answered 404 where a
malformed id is promised a 422. Walks every operation /openapi.json lists."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

SAMPLE = uuid.UUID("0b1e4c2a-7d3f-4a5b-9c6d-1e2f3a4b5c6d")
SPELLINGS = [
    "{" + str(SAMPLE) + "}",
    SAMPLE.hex,
    SAMPLE.urn,
    str(SAMPLE)[:-1],
    str(SAMPLE) + "0",
    " " + str(SAMPLE),
    str(SAMPLE).replace("-", "", 1),
]


def _uuid_parameters(document: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(method, path with other path parameters filled, parameter name, where)."""
    found = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            params = operation.get("parameters", [])
            for param in params:
                schema = param.get("schema", {})
                formats = [schema.get("format")] + [
                    s.get("format") for s in schema.get("anyOf", [])
                ]
                if "uuid" not in formats or param["in"] not in ("path", "query"):
                    continue
                filled = path
                for other in params:
                    if other["in"] == "path" and other["name"] != param["name"]:
                        filled = filled.replace("{" + other["name"] + "}", str(uuid.uuid4()))
                found.append((method, filled, param["name"], param["in"]))
    return found


async def test_every_uuid_parameter_takes_the_canonical_form_only(
    admin: httpx.AsyncClient,
) -> None:
    document = (await admin.get("/openapi.json")).json()
    found = _uuid_parameters(document)
    names = {(path, name) for _, path, name, _ in found}
    assert ("/api/v1/payments/{payment_id}", "payment_id") in names
    assert ("/api/v1/webhook-endpoints", "after") in names
    assert len([f for f in found if f[3] == "path"]) >= 10, found
    for method, path, name, where in found:
        for value in SPELLINGS:
            if where == "query":
                answer = await admin.request(method, path, params={name: value})
            else:
                answer = await admin.request(method, path.replace("{" + name + "}", value))
            assert answer.status_code == 422, (method, path, name, value, answer.text)
            fields = [error["field"] for error in answer.json()["errors"]]
            assert f"{where}.{name}" in fields, answer.text


async def test_the_canonical_form_in_either_case_is_an_id(client: httpx.AsyncClient) -> None:
    for value in (str(SAMPLE), str(SAMPLE).upper()):
        answer = await client.get(f"/api/v1/payments/{value}")
        assert answer.status_code == 404, answer.text


async def test_a_redelivery_endpoint_id_takes_the_canonical_form_only(
    client: httpx.AsyncClient,
) -> None:
    for value in SPELLINGS:
        answer = await client.post("/api/v1/events/evt_0/redeliver", json={"endpoint_id": value})
        assert answer.status_code == 422, answer.text
        assert answer.json()["errors"][0]["field"] == "body.endpoint_id", answer.text
